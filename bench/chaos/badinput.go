package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"loopx/bot/sandbox"
)

// BadInputResult is the bad-input corpus (bench/chaos/corpus): every case answered 4xx (or,
// for Lark callbacks that must not be redelivered, acknowledged and dropped), nothing
// written, never a 5xx.
type BadInputResult struct {
	Cases    map[string]int `json:"cases"` // by surface
	Passed   int            `json:"passed"`
	Failed   []string       `json:"failed"`
	Statuses map[string]int `json:"statuses"`
}

// apiCase is one file of corpus/api.
type apiCase struct {
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Token  string            `json:"token"` // admin (default), agent, none, or a literal
	Header map[string]string `json:"headers"`
	// HeaderHex sets headers to raw bytes (hex), for values JSON cannot spell.
	HeaderHex map[string]string `json:"headers_hex"`
	Body      json.RawMessage   `json:"body"`     // sent as JSON
	RawBody   *string           `json:"raw_body"` // sent as is
	Repeat    int               `json:"repeat"`   // send the raw body this many times over (size)
	Want      int               `json:"want"`     // exact status; 0 = any 4xx
	Field     string            `json:"field"`    // the field the answer must name
}

// larkCase is one file of corpus/lark: an event pushed to the callback URL.
type larkCase struct {
	Event     json.RawMessage `json:"event"`       // the plain event, encrypted and signed as Lark does
	Raw       *string         `json:"raw_body"`    // or a body sent as is (unsigned)
	AgeSecond int             `json:"age_seconds"` // the request timestamp this far in the past
	Want      string          `json:"want"`        // "4xx" or "ack" (200, nothing written)
}

// cliCase is one file of corpus/cli.
type cliCase struct {
	Args     []string `json:"args"`
	WantExit int      `json:"want_exit"`
}

// stateTables are the tables "nothing written" is checked on.
var stateTables = []string{"goal", "agent", "agent_secret", "todo", "gate", "evidence", "turn", "inbox_item",
	"outbox", "receipt", "audit", "lark_event", "binding", "quota_ledger"}

func (s *suite) counts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, t := range stateTables {
		n, err := s.count(ctx, "SELECT count(*) FROM "+t)
		if err != nil {
			return nil, err
		}
		out[t] = n
	}
	return out, nil
}

func (s *suite) badInput(ctx context.Context, res *Results) error {
	if err := s.ensureTransport(ctx, "http"); err != nil {
		return err
	}
	r := &BadInputResult{Cases: map[string]int{}, Statuses: map[string]int{}, Failed: []string{}}
	res.BadInput = r
	agentTok, err := s.agentToken(ctx)
	if err != nil {
		return err
	}
	fail := func(name, format string, args ...any) {
		r.Failed = append(r.Failed, name+": "+fmt.Sprintf(format, args...))
	}
	// Give the outbox time to settle so that "nothing written" is not confused by receipts.
	if _, err := s.waitOutboxDrained(ctx, 5*time.Minute); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(s.o.corpus, "*", "*"))
	for _, f := range files {
		surface := filepath.Base(filepath.Dir(f))
		name := surface + "/" + filepath.Base(f)
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		before, err := s.counts(ctx)
		if err != nil {
			return err
		}
		r.Cases[surface]++
		var status int
		var problem string
		switch surface {
		case "api":
			status, problem = s.runAPICase(ctx, raw, agentTok)
		case "lark":
			status, problem = s.runLarkCase(ctx, raw)
		case "cli":
			status, problem = s.runCLICase(ctx, raw)
		case "chat":
			problem = s.runChatCase(ctx, string(raw), before)
		default:
			problem = "unknown corpus folder " + surface
		}
		r.Statuses[strconv.Itoa(status)]++
		if problem != "" {
			fail(name, "%s", problem)
			continue
		}
		if surface != "chat" {
			after, err := s.counts(ctx)
			if err != nil {
				return err
			}
			if !maps.Equal(before, after) {
				fail(name, "wrote something: %v -> %v", diffCounts(before, after), "")
				continue
			}
		}
		r.Passed++
	}
	res.check(len(r.Failed) == 0, "bad input: %d cases failed: %s", len(r.Failed), strings.Join(r.Failed, "; "))
	res.check(r.Passed > 0, "bad input: the corpus at %s is empty", s.o.corpus)
	return nil
}

func diffCounts(a, b map[string]int) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s %d->%d", k, v, b[k]))
		}
	}
	return strings.Join(out, ", ")
}

// agentToken registers (once) a second agent whose token the corpus uses as "agent".
func (s *suite) agentToken(ctx context.Context) (string, error) {
	m, err := s.mustAPI(ctx, "POST", "/v1/goals/"+goalID+"/agents/"+agentID+"/rotate-token", adminToken, map[string]any{}, 200)
	if err != nil {
		return "", err
	}
	tok, _ := m["token"].(string)
	return tok, nil
}

func (s *suite) runAPICase(ctx context.Context, raw []byte, agentTok string) (int, string) {
	var c apiCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return 0, "corpus file is not JSON: " + err.Error()
	}
	var body io.Reader
	switch {
	case c.RawBody != nil:
		b := *c.RawBody
		if c.Repeat > 1 {
			b = strings.Repeat(b, c.Repeat)
		}
		body = strings.NewReader(b)
	case c.Body != nil:
		body = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, s.replicas[0].url+c.Path, body)
	if err != nil {
		return 0, err.Error()
	}
	switch c.Token {
	case "", "admin":
		req.Header.Set("Authorization", "Bearer "+adminToken)
	case "agent":
		req.Header.Set("Authorization", "Bearer "+agentTok)
	case "none":
	default:
		req.Header.Set("Authorization", c.Token)
	}
	if c.Method != http.MethodGet {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("corpus-%d", time.Now().UnixNano()))
	}
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.Header {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	for k, v := range c.HeaderHex {
		b, err := hex.DecodeString(v)
		if err != nil {
			return 0, "headers_hex: " + err.Error()
		}
		req.Header[http.CanonicalHeaderKey(k)] = []string{string(b)}
	}
	status, out, err := rawRoundTrip(req)
	if err != nil {
		return 0, err.Error()
	}
	switch {
	case status >= 500:
		return status, fmt.Sprintf("answered %d: %s", status, out)
	case c.Want != 0 && status != c.Want:
		return status, fmt.Sprintf("answered %d, want %d: %s", status, c.Want, out)
	case c.Want == 0 && (status < 400 || status >= 500):
		return status, fmt.Sprintf("answered %d, want a 4xx: %s", status, out)
	}
	if c.Field != "" {
		var eb struct {
			Error struct {
				Field string `json:"field"`
			} `json:"error"`
		}
		if json.Unmarshal(out, &eb) != nil || eb.Error.Field != c.Field {
			return status, fmt.Sprintf("the answer names field %q, want %q: %s", eb.Error.Field, c.Field, out)
		}
	}
	return status, ""
}

// rawRoundTrip sends req as it is, header bytes included: net/http's client refuses header
// values with control characters, which the corpus wants to send.
func rawRoundTrip(req *http.Request) (int, []byte, error) {
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		// Write validates nothing but the method; fall back to building the request by hand.
		return 0, nil, err
	}
	conn, err := dialHost(req.URL.Host)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(buf.Bytes()); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(bufioReader(conn), req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}

func (s *suite) runLarkCase(ctx context.Context, raw []byte) (int, string) {
	var c larkCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return 0, "corpus file is not JSON: " + err.Error()
	}
	url := s.replicas[0].url + "/lark/events"
	var status int
	var out []byte
	var err error
	switch {
	case c.Raw != nil:
		status, out, err = postRaw(ctx, url, []byte(*c.Raw))
	case c.AgeSecond != 0:
		aged, aerr := sandbox.New(sandbox.Options{VerificationToken: verifyToken, EncryptKey: encryptKey,
			AppID: s.sb.AppID(), AppSecret: s.sb.AppSecret(), Now: func() time.Time { return time.Now().Add(-time.Duration(c.AgeSecond) * time.Second) }})
		if aerr != nil {
			return 0, aerr.Error()
		}
		status, out, err = aged.PushHTTP(ctx, url, c.Event)
		aged.Close()
	default:
		status, out, err = s.sb.PushHTTP(ctx, url, c.Event)
	}
	if err != nil {
		return 0, err.Error()
	}
	switch c.Want {
	case "ack":
		if status != http.StatusOK {
			return status, fmt.Sprintf("answered %d, want 200 (acknowledged and dropped): %s", status, out)
		}
	default:
		if status < 400 || status >= 500 {
			return status, fmt.Sprintf("answered %d, want a 4xx: %s", status, out)
		}
	}
	return status, ""
}

func (s *suite) runCLICase(ctx context.Context, raw []byte) (int, string) {
	var c cliCase
	if err := json.Unmarshal(raw, &c); err != nil {
		return 0, "corpus file is not JSON: " + err.Error()
	}
	var args []string
	for _, a := range c.Args {
		// \xNN in an argument stands for that byte (flags JSON cannot spell).
		if u, err := strconv.Unquote(`"` + a + `"`); err == nil {
			a = u
		}
		args = append(args, a)
	}
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "LOOPX_URL=" + s.replicas[0].url, "LOOPX_TOKEN=" + adminToken}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return 0, err.Error()
	}
	if code != c.WantExit {
		return code, fmt.Sprintf("exit %d, want %d: %s", code, c.WantExit, tail(out.String(), 300))
	}
	return code, ""
}

// runChatCase sends one line of chat text from the owner in a bound chat: it must be
// acknowledged at the first push (no redelivery), and change no state but the bot's answer
// (the event id and the reply).
func (s *suite) runChatCase(ctx context.Context, text string, before map[string]int) string {
	text = strings.TrimSuffix(text, "\n")
	if u, err := strconv.Unquote(`"` + text + `"`); err == nil && strings.Contains(text, `\`) {
		text = u
	}
	d, err := s.sb.UserSays(chatID(0), sandbox.ChatGroup, ownerID, text, sandbox.MentionBot())
	if err != nil {
		return "send: " + err.Error()
	}
	res, err := d.Wait(ctx)
	if err != nil || !res.Acked || res.Attempts != 1 {
		return fmt.Sprintf("acked %v after %d pushes (last %d %s)", res.Acked, res.Attempts, res.Status, res.Err)
	}
	after, err := s.counts(ctx)
	if err != nil {
		return err.Error()
	}
	for _, t := range []string{"goal", "agent", "agent_secret", "todo", "gate", "evidence", "turn", "inbox_item", "binding", "quota_ledger"} {
		if before[t] != after[t] {
			return fmt.Sprintf("changed %s: %d -> %d", t, before[t], after[t])
		}
	}
	return ""
}

func dialHost(host string) (net.Conn, error) { return net.DialTimeout("tcp", host, 5*time.Second) }

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// postRaw posts body as it is (no signature, no encryption) to url.
func postRaw(ctx context.Context, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}
