package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loopx/api"
	"loopx/api/client"
	"loopx/store"
	"loopx/templates"
)

// API is the HTTP API as the tools call it. *client.Client implements it.
type API interface {
	Do(ctx context.Context, r client.Request) (json.RawMessage, error)
	BaseURL() string
}

var _ API = (*client.Client)(nil)

// Options configures a server.
type Options struct {
	// API is the client the tools call, authenticated as the agent. Nil: the server still
	// starts (a host lists its tools) but every tool answers with Unconnected.
	API API
	// GoalID and AgentID are who the session works as.
	GoalID  string
	AgentID string
	// Unconnected says, when API is nil, why there is no connection and what to do.
	Unconnected string
	// Shared is what sessions share (templates, tool schemas); nil: built for this server
	// alone. A process serving many sessions builds one (NewShared) and passes it to each.
	Shared *Shared
	// Version is reported in the initialize answer.
	Version string
	Logger  *slog.Logger
	// SessionID, when set, names the session this server will serve (Handler keeps its own
	// count of sessions by it); nil: the SDK's random id.
	SessionID func() string
	// Now is the clock that tells whether the session's turn lease has passed; nil is
	// time.Now.
	Now func() time.Time
	// LocalFiles lets tools read and write files by path on this machine (file_path,
	// save_to): on for `loopx mcp` (stdio, next to the agent), off for the HTTP endpoint.
	LocalFiles bool
	// Stateless: the server answers one request (protocol 2026-07-28 over HTTP), so it has no
	// session to remember a turn in; should_run takes the agent's live turn as its own.
	Stateless bool
}

// server is one session's tools and the session's turn.
type server struct {
	api         API
	goal, agent string
	unconnected string
	tpl         *templates.Set
	shared      *Shared
	logger      *slog.Logger
	now         func() time.Time
	nonce       string // stands for the turn in idempotency keys outside a turn

	mu        sync.Mutex
	turn      string    // the live turn this session opened or adopted ("" = none)
	lease     time.Time // when that turn's lease passes
	todo      int64     // that turn's todo
	pending   string    // a minted turn id whose should_run answer has not arrived yet
	settled   string    // the last turn this session settled (a repeated spend replays it)
	acks      int       // successful inbox_ack calls; part of inbox_drain's key
	stateless bool      // one request, no session: the agent's live turn is this server's
	checked   bool      // the token was checked (whoami): an agent's
	refused   string    // why the token is refused (the admin token); every call answers it

	localFiles bool
}

// New returns the MCP server for one session.
func New(opts Options) (*sdk.Server, error) {
	if opts.API != nil && (opts.GoalID == "" || opts.AgentID == "") {
		return nil, errors.New("new mcp server: GoalID and AgentID are required with an API")
	}
	sh := opts.Shared
	if sh == nil {
		var err error
		if sh, err = NewShared(nil); err != nil {
			return nil, err
		}
	}
	s := &server{api: opts.API, goal: opts.GoalID, agent: opts.AgentID, unconnected: opts.Unconnected, localFiles: opts.LocalFiles,
		tpl: sh.tpl, shared: sh, logger: opts.Logger, now: opts.Now, nonce: randomHex(8), stateless: opts.Stateless}
	if s.api == nil && s.unconnected == "" {
		s.unconnected = "this project is not connected to LoopX. Ask the user to run `loopx connect` in the project's root folder, then restart this MCP server (reload the host)."
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "loopx", Title: "LoopX", Version: opts.Version},
		&sdk.ServerOptions{Instructions: s.instructions(), Logger: s.logger, SchemaCache: sh.cache,
			GetSessionID: opts.SessionID})
	if err := s.addTools(srv); err != nil {
		return nil, fmt.Errorf("new mcp server: %w", err)
	}
	s.addResources(srv)
	s.addPrompts(srv)
	return srv, nil
}

// instructions is what the host shows the model about this server in every session, in any
// folder: what the tools are for (the loop contract's always-on text), never a rule for
// ordinary requests. It is built from the options only: initialize must answer at once,
// without a network call.
func (s *server) instructions() string {
	if s.api == nil {
		return "LoopX is not set up in this folder, so its tools have nothing to work on here: leave them alone " +
			"unless the user asks for LoopX; then tell them what is missing: " + s.unconnected
	}
	return templates.LoopTools("") +
		fmt.Sprintf(" Here it is connected to %s as agent %q on goal %q.", s.api.BaseURL(), s.agent, s.goal)
}

// connected is nil with a connection; without one it is every tool's answer, saying what to
// do. The first call checks the token once: the tools work as one agent, never as the admin
// (a LOOPX_TOKEN holding the admin token is refused, as /mcp refuses it).
func (s *server) connected(ctx context.Context) error {
	if s.api == nil {
		return errors.New(s.unconnected)
	}
	s.mu.Lock()
	checked, refused := s.checked, s.refused
	s.mu.Unlock()
	if refused != "" {
		return errors.New(refused)
	}
	if checked {
		return nil
	}
	var who api.Whoami
	raw, err := s.api.Do(ctx, client.Request{Method: http.MethodGet, Path: "/v1/whoami"})
	if err != nil {
		return nil // the call itself will say what is wrong with the server or the token
	}
	if err := json.Unmarshal(raw, &who); err != nil {
		return fmt.Errorf("check the token: decode the server's answer: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked = true
	if who.Admin {
		s.refused = "loopx mcp works as one agent, but its token (LOOPX_TOKEN) is the admin token, which the tools never use. " +
			fmt.Sprintf("Ask the user to unset LOOPX_TOKEN (loopx connect stored the token of agent %q on goal %q for this machine) "+
				"or to set it to that agent's token, then reload the host.", s.agent, s.goal)
		return errors.New(s.refused)
	}
	return nil
}

// key derives the Idempotency-Key of a mutating call from who, the turn, the tool, its
// arguments and anything else that must make two calls distinct (a version read). The turn
// is one the server knows, so a call retried after the host restarted this process derives
// the same key and has one effect: the session's live turn, else the agent's live turn on
// the server, else the agent's latest turn (calls between two turns share a key only with
// their own retries and repeats in that interval).
func (s *server) key(ctx context.Context, tool string, args any, extra ...any) string {
	return s.keyIn(s.keyTurn(ctx), tool, args, extra...)
}

// keyIn derives the key of a call made in turn.
func (s *server) keyIn(turn, tool string, args any, extra ...any) string {
	b, err := json.Marshal([]any{s.goal, s.agent, turn, tool, args, extra})
	if err != nil { // arguments come from decoded JSON: they encode
		b = []byte(fmt.Sprint(s.goal, s.agent, turn, tool, args, extra))
	}
	sum := sha256.Sum256(b)
	return "mcp-" + tool + "-" + hex.EncodeToString(sum[:16])
}

// keyTurn is the turn part of a key (see key).
func (s *server) keyTurn(ctx context.Context) string {
	s.mu.Lock()
	turn, lease := s.turn, s.lease
	s.mu.Unlock()
	if turn != "" && s.now().Before(lease) {
		return turn
	}
	t, err := s.latestTurn(ctx)
	switch {
	case err != nil:
		// The call itself will most likely fail the same way; its key need not survive.
		s.logger.Warn("read the agent's latest turn for an idempotency key", "err", err)
		return "session:" + s.nonce
	case t == nil:
		return "before-first-turn"
	case t.State == store.TurnLive && s.now().Before(t.LeaseExpiresAt):
		return t.InstanceID
	}
	return "after:" + t.InstanceID
}

// latestTurn is the agent's newest turn on the server; nil when it has none.
func (s *server) latestTurn(ctx context.Context) (*store.RunTurn, error) {
	var latest struct {
		Turns []store.RunTurn `json:"turns"`
	}
	q := url.Values{"agent_id": {s.agent}, "limit": {"1"}}
	if err := s.get(ctx, "read the agent's turn", s.goalPath("turns"), q, &latest); err != nil {
		return nil, err
	}
	if len(latest.Turns) == 0 {
		return nil, nil
	}
	return &latest.Turns[0], nil
}

// adopt makes the agent's live turn on the server this session's turn, when the session has
// none: the host restarted this process in the middle of its turn.
func (s *server) adopt(ctx context.Context) {
	s.mu.Lock()
	known := s.turn != "" && s.now().Before(s.lease)
	s.mu.Unlock()
	if known {
		return
	}
	t, err := s.latestTurn(ctx)
	if err != nil || t == nil || t.State != store.TurnLive || !s.now().Before(t.LeaseExpiresAt) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == "" || !s.now().Before(s.lease) {
		s.turn, s.lease, s.todo = t.InstanceID, t.LeaseExpiresAt, t.TodoID
	}
}

// get reads path into out.
func (s *server) get(ctx context.Context, tool, path string, query url.Values, out any) error {
	raw, err := s.api.Do(ctx, client.Request{Method: "GET", Path: path, Query: query})
	if err != nil {
		return explain(tool, s, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: decode the server's answer: %w", tool, err)
	}
	return nil
}

// send makes a mutating call under the tool's idempotency key and decodes the answer.
func (s *server) send(ctx context.Context, tool, method, path string, body any, key string, out any) error {
	raw, err := s.api.Do(ctx, client.Request{Method: method, Path: path, Body: body, IdempotencyKey: key})
	if err != nil {
		return explain(tool, s, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: decode the server's answer: %w", tool, err)
	}
	return nil
}

func (s *server) goalPath(rest ...string) string { return client.GoalPath(s.goal, rest...) }

// schemaFor infers T's JSON schema. Raw JSON members (a ledger entry's detail) hold a JSON
// object, not the byte array Go's type suggests.
func schemaFor[T any]() (*jsonschema.Schema, error) {
	return jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Type: "object"},
	}})
}

// addTool registers a typed tool with its input and output schemas, made portable
// (schema.go): the output's is infer's when given, else Out's. Both are computed once per
// process (Shared) and reused by every session.
func addTool[In, Out any](sh *Shared, srv *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out], infer ...func() (*jsonschema.Schema, error)) error {
	f := schemaFor[Out]
	if len(infer) > 0 {
		f = infer[0]
	}
	out, err := sh.outputSchema(t.Name, func() (*jsonschema.Schema, error) {
		s, err := f()
		if err != nil {
			return nil, err
		}
		return portableOutput(s), nil
	})
	if err != nil {
		return fmt.Errorf("output schema of %s: %w", t.Name, err)
	}
	in, err := sh.outputSchema("input of "+t.Name, func() (*jsonschema.Schema, error) {
		s, err := schemaFor[In]()
		if err != nil {
			return nil, err
		}
		return portableInput(s, inputEnums[t.Name]), nil
	})
	if err != nil {
		return fmt.Errorf("input schema of %s: %w", t.Name, err)
	}
	t.InputSchema, t.OutputSchema = in, out
	sdk.AddTool(srv, t, h)
	return nil
}

// mergedSchema is the schema of an object holding A's members and B's (an embedded struct
// and the fields beside it; the schema inference does not flatten an embedded struct whose
// members share its name).
func mergedSchema[A, B any]() (*jsonschema.Schema, error) {
	a, err := schemaFor[A]()
	if err != nil {
		return nil, err
	}
	b, err := schemaFor[B]()
	if err != nil {
		return nil, err
	}
	for name, p := range b.Properties {
		a.Properties[name] = p
	}
	a.Required = append(a.Required, b.Required...)
	return a, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
