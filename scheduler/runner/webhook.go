package runner

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-retry"

	"loopx/scheduler"
	"loopx/store"
)

// WebhookSettings are a webhook agent's runner_config; the rules they follow live in store.
type WebhookSettings = store.WebhookSettings

// ParseWebhookSettings reads and checks a webhook runner_config.
func ParseWebhookSettings(raw json.RawMessage) (WebhookSettings, error) {
	return store.ParseWebhookSettings(raw)
}

// Signature headers of a webhook turn.
const (
	HeaderSignature = "X-Loopx-Signature" // "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body))
	HeaderTimestamp = "X-Loopx-Timestamp" // unix seconds
	HeaderDelivery  = "X-Loopx-Delivery"  // the turn instance id; the same on every retry
)

// Sign returns the signature header value for body sent at ts.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Webhook POSTs the turn packet (with the turn token in loopx_token) to the agent's URL,
// signed, and treats the response as the end of the turn: 2xx is ok (the body's end is the
// log tail); 4xx other than 408/429 fails at once; 408, 429, 5xx and network errors are
// retried with exponential backoff until the turn's timeout.
type Webhook struct {
	Base
	Client *http.Client
	// Timeout is the default turn timeout; 0 means 10 minutes.
	Timeout time.Duration
	// Retries bounds the attempts after the first; 0 means 4.
	Retries uint64
	// Backoff is the first retry delay; 0 means 1 s.
	Backoff time.Duration
}

var _ scheduler.Runner = (*Webhook)(nil)

// cancelTurn tells the agent an owner stopped its turn: a signed POST of
// {"turn_instance_id", "goal_id", "agent_id", "cancelled": true} to its cancel URL, when it
// has one. It says in words what happened, for the turn's outcome.
func (w *Webhook) cancelTurn(ctx context.Context, client *http.Client, s WebhookSettings, p Packet) string {
	if s.CancelURL == "" {
		return "the agent has no cancel URL; its answer is ignored"
	}
	body, _ := json.Marshal(map[string]any{"turn_instance_id": p.TurnInstanceID, "goal_id": p.GoalID, "agent_id": p.AgentID, "cancelled": true})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, s.CancelURL, bytes.NewReader(body))
	if err != nil {
		return "cancel URL: " + err.Error()
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(s.Secret, ts, body))
	req.Header.Set(HeaderDelivery, p.TurnInstanceID)
	resp, err := client.Do(req)
	if err != nil {
		return "cancel URL unreachable: " + redact(err.Error(), s.Secret)
	}
	_ = resp.Body.Close()
	return "cancel URL answered " + strconv.Itoa(resp.StatusCode)
}

type webhookBody struct {
	Packet
	Token string `json:"loopx_token"`
}

// Run carries out one turn and reports how it ended.
func (w *Webhook) Run(ctx context.Context, job scheduler.Job) scheduler.Result {
	cfg, err := w.runnerConfig(ctx, job)
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "runner settings: " + err.Error()}
	}
	s, err := ParseWebhookSettings(cfg)
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "runner settings: " + err.Error()}
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if s.Timeout != "" {
		timeout, _ = time.ParseDuration(s.Timeout)
	}
	if lease := time.Until(job.Turn.LeaseExpiresAt); lease > 0 && lease < timeout {
		timeout = lease
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	packet, token, err := w.prepare(ctx, job, time.Now().Add(timeout))
	if err != nil {
		return scheduler.Result{State: store.TurnFailed, Outcome: "prepare turn: " + err.Error()}
	}
	body, _ := json.Marshal(webhookBody{Packet: packet, Token: token})
	client := w.Client
	if client == nil {
		client = &http.Client{}
	}
	retries, backoff := w.Retries, w.Backoff
	if retries == 0 {
		retries = 4
	}
	if backoff <= 0 {
		backoff = time.Second
	}
	var res scheduler.Result
	attempts := 0
	err = retry.Do(ctx, retry.WithMaxRetries(retries, retry.NewExponential(backoff)), func(ctx context.Context) error {
		attempts++
		ts := time.Now().Unix()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderSignature, Sign(s.Secret, ts, body))
		req.Header.Set(HeaderDelivery, packet.TurnInstanceID)
		resp, err := client.Do(req)
		if err != nil {
			return retry.RetryableError(err)
		}
		defer resp.Body.Close()
		t := newTail(8 << 10)
		_, _ = io.Copy(t, io.LimitReader(resp.Body, 1<<20))
		res.LogTail = redact(t.String(), s.Secret, token)
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			res.State, res.Outcome = store.TurnOK, "webhook "+strconv.Itoa(resp.StatusCode)
			return nil
		case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return retry.RetryableError(fmt.Errorf("webhook answered %d", resp.StatusCode))
		default:
			return fmt.Errorf("webhook answered %d", resp.StatusCode)
		}
	})
	if stop := scheduler.StopOf(ctx); stop != nil {
		return scheduler.Result{State: store.TurnStopped, Outcome: stop.Error() + "; " + w.cancelTurn(ctx, client, s, packet), LogTail: res.LogTail}
	}
	if err != nil {
		msg := err.Error()
		if ctx.Err() != nil && !strings.Contains(msg, "answered") {
			msg = "timed out after " + timeout.String()
		}
		return scheduler.Result{State: store.TurnFailed, Outcome: msg + " (" + strconv.Itoa(attempts) + " attempts)", LogTail: res.LogTail}
	}
	return res
}
