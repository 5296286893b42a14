package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loopx/api"
	"loopx/api/client"
	"loopx/inbox"
	"loopx/quota"
	"loopx/store"
)

// Tool inputs: `json` names the argument, `jsonschema` is its description, and only fields
// without omitempty are required.

// ShouldRunIn is should_run's input.
type ShouldRunIn struct {
	TurnInstanceID string `json:"turn_instance_id,omitempty" jsonschema:"the host's id for this turn, e.g. a heartbeat id; omit it and loopx mints one"`
	BeginTurn      *bool  `json:"begin_turn,omitempty" jsonschema:"open the turn when the answer is run (default true); false only looks and records nothing"`
	TodoID         int64  `json:"todo_id,omitempty" jsonschema:"the todo this turn is for, e.g. the one todo_add made for the user's task: the turn opens on it (and claims it); mid-turn, before any evidence, it moves the live turn to it"`
}

// ShouldRunOut is should-run's decision plus what this session knows about its turn.
type ShouldRunOut struct {
	quota.Decision
	ShouldRunExtra
}

// ShouldRunExtra is what should_run adds to the API's decision.
type ShouldRunExtra struct {
	// YourTurn is the live turn this session opened, when there is one.
	YourTurn *YourTurn `json:"your_turn,omitempty"`
	// RecentGates are this agent's latest gates (open ones and answered ones), newest first.
	RecentGates []store.Gate `json:"recent_gates"`
	// NextStep says in words what to do now.
	NextStep string `json:"next_step"`
}

// YourTurn is the session's live turn.
type YourTurn struct {
	TurnInstanceID string    `json:"turn_instance_id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	TodoID         int64     `json:"todo_id,omitempty"`
}

// TodoListIn is todo_list's input.
type TodoListIn struct {
	Status string `json:"status,omitempty" jsonschema:"comma-separated statuses: open, blocked, done, cancelled (default open,blocked)"`
	Mine   bool   `json:"mine,omitempty" jsonschema:"only todos claimed by this agent"`
}

// TodosOut lists todos.
type TodosOut struct {
	Todos []store.Todo `json:"todos"`
}

// TodoAddIn is todo_add's input.
type TodoAddIn struct {
	Text     string `json:"text" jsonschema:"what to do, one slice of work (up to 12000 characters)"`
	Priority *int   `json:"priority,omitempty" jsonschema:"0 (most urgent) to 4; default 2"`
	Role     string `json:"role,omitempty" jsonschema:"agent (default) or user: a todo for a person"`
	Claim    bool   `json:"claim,omitempty" jsonschema:"claim it for this agent at once; inside a live turn that has recorded nothing yet, the turn moves to it"`
	// Criteria and Requires are set when the todo is added; only people change them later.
	Criteria []string `json:"criteria,omitempty" jsonschema:"acceptance criteria, each 'what must be true' or 'c2: what must be true' (ids c1, c2... unless given): the todo is finished only once evidence names each"`
	Requires []string `json:"requires,omitempty" jsonschema:"capabilities an agent needs to claim it, among the goal's (contract.capabilities.goal), such as write-code"`
}

// TodoOut is one todo.
type TodoOut struct {
	Todo store.Todo `json:"todo"`
	// NextStep, from todo_add with claim in a live turn, says which todo the turn is on now.
	NextStep string `json:"next_step,omitempty"`
}

// TodoClaimIn is todo_claim's input.
type TodoClaimIn struct {
	TodoID       int64  `json:"todo_id" jsonschema:"the todo to claim (should_run's selected_todo.todo_id)"`
	Transfer     bool   `json:"transfer,omitempty" jsonschema:"take it over from the agent that holds it; only when the user asked"`
	LeaseSeconds int    `json:"lease_seconds,omitempty" jsonschema:"the claim expires after this many seconds (default never)"`
	Note         string `json:"note,omitempty" jsonschema:"with transfer: what the previous holder did (needed when the todo has evidence); recorded as a handoff"`
	Next         string `json:"next,omitempty" jsonschema:"with transfer: what is next"`
}

// TodoHandoffIn is todo_handoff's input.
type TodoHandoffIn struct {
	TodoID      int64   `json:"todo_id" jsonschema:"the todo to hand on (one this agent holds, or nobody does)"`
	ToAgent     string  `json:"to_agent" jsonschema:"the agent that receives it (this agent's own id: your own next turn)"`
	Kind        string  `json:"kind,omitempty" jsonschema:"what the receiver does: resume (default), review, verify or answer_gate"`
	Done        string  `json:"done,omitempty" jsonschema:"what was done (give done or next)"`
	Next        string  `json:"next,omitempty" jsonschema:"what is next, for the receiver"`
	Questions   string  `json:"questions,omitempty" jsonschema:"open questions"`
	EvidenceIDs []int64 `json:"evidence_ids,omitempty" jsonschema:"the evidence it rests on (default the todo's)"`
}

// HandoffOut is a recorded handoff and what to do now.
type HandoffOut struct {
	Handoff  store.Handoff `json:"handoff"`
	NextStep string        `json:"next_step"`
}

// AcknowledgeIn is acknowledge's input: one of the two ids.
type AcknowledgeIn struct {
	HandoffID  int64 `json:"handoff_id,omitempty" jsonschema:"the continuation read (should_run's continuation.handoff_id)"`
	DecisionID int64 `json:"decision_id,omitempty" jsonschema:"the objective change read (should_run's objective_changed.decision_id)"`
}

// TodoUpdateIn is todo_update's input.
type TodoUpdateIn struct {
	TodoID   int64   `json:"todo_id" jsonschema:"the todo to change"`
	Status   *string `json:"status,omitempty" jsonschema:"open, blocked, done or cancelled"`
	Text     *string `json:"text,omitempty" jsonschema:"new text"`
	Priority *int    `json:"priority,omitempty" jsonschema:"0 (most urgent) to 4"`
	Release  bool    `json:"release,omitempty" jsonschema:"drop this agent's claim"`
	Version  int64   `json:"version,omitempty" jsonschema:"the version you read; omit it and the current one is read (a concurrent change is still refused)"`
}

// TodoFinishIn is todo_finish's input.
type TodoFinishIn struct {
	TodoID  int64 `json:"todo_id" jsonschema:"the todo that is done"`
	Version int64 `json:"version,omitempty" jsonschema:"the version you read; omit it and the current one is read"`
}

// EvidenceAddIn is evidence_add's input.
type EvidenceAddIn struct {
	Summary string `json:"summary" jsonschema:"what you produced and how it was checked (up to 12000 characters)"`
	TodoID  int64  `json:"todo_id,omitempty" jsonschema:"the todo it belongs to"`
	Kind    string `json:"kind,omitempty" jsonschema:"link, command, note (default) or artifact"`
	Ref     string `json:"ref,omitempty" jsonschema:"a link, the command that checks it, or an artifact path"`
	// Criteria are what lets a todo with criteria be finished.
	Criteria []string `json:"criteria,omitempty" jsonschema:"the acceptance criteria this evidence shows met: ids of the todo's (selected_todo.criteria) or the goal's (contract.criteria), such as c1 or g2"`
	FileIn
}

// FileIn is a file a tool uploads: a path on this machine (loopx mcp), or a name and its
// content in base64.
type FileIn struct {
	FilePath      string `json:"file_path,omitempty" jsonschema:"a file on this machine to attach (a deliverable people download); only with loopx mcp"`
	FileName      string `json:"file_name,omitempty" jsonschema:"the file's name, with content_base64"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's content in base64, with file_name (when file_path cannot be used)"`
}

// EvidenceOut is one piece of evidence.
type EvidenceOut struct {
	Evidence store.Evidence `json:"evidence"`
}

// GateAskIn is gate_ask's input.
type GateAskIn struct {
	Question string   `json:"question" jsonschema:"the decision the owners must make, with what they need to decide (up to 12000 characters)"`
	Options  []string `json:"options,omitempty" jsonschema:"answer options (default approve, reject)"`
	TodoID   int64    `json:"todo_id,omitempty" jsonschema:"the todo that waits for the answer; omit it and the whole goal waits"`
}

// GateOut is one gate and what to do while it is open.
type GateOut struct {
	Gate     store.Gate `json:"gate"`
	NextStep string     `json:"next_step"`
}

// GateListIn is gate_list's input.
type GateListIn struct {
	Status string `json:"status,omitempty" jsonschema:"open, approved, rejected, answered (with one of the gate's own options, in answer) or cancelled (default all, newest first)"`
}

// GatesOut lists gates.
type GatesOut struct {
	Gates []store.Gate `json:"gates"`
}

// InboxDrainIn is inbox_drain's input.
type InboxDrainIn struct {
	Limit int `json:"limit,omitempty" jsonschema:"at most this many messages (default 50, at most 200)"`
}

// InboxAckIn is inbox_ack's input.
type InboxAckIn struct {
	ItemIDs []int64 `json:"item_ids" jsonschema:"the messages whose effect is written (replied to or done)"`
}

// InboxReplyIn is inbox_reply's input.
type InboxReplyIn struct {
	ItemID int64  `json:"item_id" jsonschema:"the message to answer"`
	Text   string `json:"text,omitempty" jsonschema:"the answer, posted in the message's chat and thread (up to 12000 characters); may be empty when a file is sent"`
	FileIn
}

// ProgressIn is progress's input.
type ProgressIn struct {
	Text string `json:"text" jsonschema:"what the turn is doing now, one short line (shown on its live card in chat)"`
}

// FileGetIn is file_get's input.
type FileGetIn struct {
	FileID int64  `json:"file_id" jsonschema:"the file's id (files[].file_id of inbox_drain items or evidence)"`
	SaveTo string `json:"save_to,omitempty" jsonschema:"a path on this machine to write it to (only with loopx mcp); without it the content comes back in base64"`
}

// FileGetOut is a downloaded file.
type FileGetOut struct {
	FileID        int64  `json:"file_id"`
	Size          int    `json:"size"`
	SHA256        string `json:"sha256"`
	Path          string `json:"path,omitempty"`
	ContentBase64 string `json:"content_base64,omitempty"`
}

// RefreshStateIn is refresh_state's input.
type RefreshStateIn struct {
	NextAction     string      `json:"next_action,omitempty" jsonschema:"what the next turn should do first"`
	TurnInstanceID string      `json:"turn_instance_id,omitempty" jsonschema:"the turn; default this session's turn"`
	Handoff        *HandoffArg `json:"handoff,omitempty" jsonschema:"a handoff, when work remains: what was done, what is next, for whom (default your own next turn)"`
}

// HandoffArg is the handoff a turn ends with.
type HandoffArg struct {
	Done      string `json:"done,omitempty" jsonschema:"what this turn did"`
	Next      string `json:"next,omitempty" jsonschema:"what is next (default next_action)"`
	Questions string `json:"questions,omitempty" jsonschema:"open questions"`
	ToAgent   string `json:"to_agent,omitempty" jsonschema:"the agent it is for (default this agent's next turn); the turn's todo moves to it"`
	Kind      string `json:"kind,omitempty" jsonschema:"resume (default), review, verify or answer_gate"`
	TodoID    int64  `json:"todo_id,omitempty" jsonschema:"the todo it is about (default the turn's)"`
}

// RefreshStateOut is the quota-neutral state record and, when the turn handed off, the
// handoff.
type RefreshStateOut struct {
	Entry   store.LedgerEntry `json:"state_refreshed"`
	Handoff *store.Handoff    `json:"handoff,omitempty"`
}

// SpendSlotIn is spend_slot's input.
type SpendSlotIn struct {
	TodoID         int64  `json:"todo_id,omitempty" jsonschema:"the todo the turn worked on (default the turn's)"`
	TurnInstanceID string `json:"turn_instance_id,omitempty" jsonschema:"the turn; default this session's turn"`
}

// SpendSlotOut is the spend receipt.
type SpendSlotOut struct {
	Receipt store.SpendReceipt `json:"receipt"`
}

// GoalStatusIn is goal_status's input (none).
type GoalStatusIn struct{}

func boolPtr(b bool) *bool { return &b }

// handoffKinds are the kinds of a handoff.
var handoffKinds = []any{store.HandoffResume, store.HandoffReview, store.HandoffVerify, store.HandoffAnswerGate}

// inputEnums are the closed sets of the tools' inputs, by tool and property (a dotted path
// for a member of an object property).
var inputEnums = map[string]map[string][]any{
	"todo_add":      {"role": {"agent", "user"}},
	"todo_update":   {"status": {store.TodoOpen, store.TodoBlocked, store.TodoDone, store.TodoCancelled}},
	"evidence_add":  {"kind": {"link", "command", "note", "artifact"}},
	"gate_list":     {"status": {store.GateOpen, store.GateApproved, store.GateRejected, store.GateAnswered, store.GateCancelled}},
	"todo_handoff":  {"kind": handoffKinds},
	"refresh_state": {"handoff.kind": handoffKinds},
}

func (s *server) addTools(srv *sdk.Server) error {
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	write := func() *sdk.ToolAnnotations {
		return &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)}
	}
	for _, err := range []error{
		addTool(s.shared, srv, &sdk.Tool{Name: "should_run", Annotations: write(),
			Description: "Opens a LoopX turn (the /loopx steps, a heartbeat): answers whether to work now. A run answer opens the turn on a todo (todo_id names it; else the goal's next one) with its criteria; " +
				"a skip answer (should_run false) opens nothing and says why and when to check again (next_step, scheduler_hint); state done: the goal is finished, stop. " +
				"Every answer carries the goal contract (contract: objective, scope to stay in, capabilities, criteria), a handoff to this agent (continuation) and an objective change (objective_changed), each shown until acknowledged with acknowledge."}, s.shouldRun, mergedSchema[quota.Decision, ShouldRunExtra]),
		addTool(s.shared, srv, &sdk.Tool{Name: "todo_list", Annotations: readOnly,
			Description: "List the goal's todos by priority (open and blocked by default)."}, s.todoList),
		addTool(s.shared, srv, &sdk.Tool{Name: "todo_add", Annotations: write(),
			Description: "Add a todo to the goal (a slice of work for an agent, or a task for a person with role=user), with the acceptance criteria evidence must name before it is finished and the capabilities it requires."}, s.todoAdd),
		addTool(s.shared, srv, &sdk.Tool{Name: "todo_claim", Annotations: write(),
			Description: "Claim a todo for this agent before working on it; never takes another agent's claim unless transfer=true (a todo with evidence changes hands only with a note). Refused when the todo requires a capability this agent lacks."}, s.todoClaim),
		addTool(s.shared, srv, &sdk.Tool{Name: "todo_update", Annotations: write(),
			Description: "Change a todo this agent holds: status, text, priority, or release the claim."}, s.todoUpdate),
		addTool(s.shared, srv, &sdk.Tool{Name: "todo_finish", Annotations: write(),
			Description: "Mark a todo this agent holds as done, after its evidence is recorded; refused, naming them, while a criterion of the todo has no evidence."}, s.todoFinish),
		addTool(s.shared, srv, &sdk.Tool{Name: "evidence_add", Annotations: write(),
			Description: "Record what this turn produced (a link, a command that checks it, a note); it counts as the turn's progress. Name in criteria the acceptance criteria it shows met."}, s.evidenceAdd),
		addTool(s.shared, srv, &sdk.Tool{Name: "gate_ask", Annotations: write(),
			Description: "Ask the goal's owners for a decision (posted as a card in their chat); the todo waits until an owner answers."}, s.gateAsk),
		addTool(s.shared, srv, &sdk.Tool{Name: "gate_list", Annotations: readOnly,
			Description: "List the goal's owner gates with their answers, newest first."}, s.gateList),
		addTool(s.shared, srv, &sdk.Tool{Name: "inbox_drain", Annotations: write(),
			Description: "Take the messages people sent this agent (steering ones first); answer each with inbox_reply, then inbox_ack them."}, s.inboxDrain),
		addTool(s.shared, srv, &sdk.Tool{Name: "inbox_ack", Annotations: write(),
			Description: "Acknowledge drained messages once their effect is written; unacknowledged ones come back later."}, s.inboxAck),
		addTool(s.shared, srv, &sdk.Tool{Name: "inbox_reply", Annotations: write(),
			Description: "Answer a drained message in the chat and thread it came from."}, s.inboxReply),
		addTool(s.shared, srv, &sdk.Tool{Name: "refresh_state", Annotations: write(),
			Description: "Record what the next turn should do first (quota-neutral) and, when work remains, a handoff: what was done, what is next, for whom (this agent's next turn or another agent). Call it before spend_slot."}, s.refreshState),
		addTool(s.shared, srv, &sdk.Tool{Name: "todo_handoff", Annotations: write(),
			Description: "Hand a todo to another agent (or your own next turn) with what was done and what is next: its claim moves to the receiver, whose should_run carries the handoff as its continuation."}, s.todoHandoff),
		addTool(s.shared, srv, &sdk.Tool{Name: "acknowledge", Annotations: write(),
			Description: "Acknowledge a continuation (handoff_id) or an objective change (decision_id) after reading it, so should_run stops carrying it."}, s.acknowledge),
		addTool(s.shared, srv, &sdk.Tool{Name: "spend_slot", Annotations: write(),
			Description: "Settle this turn: spend its one quota slot, once, after the work is validated. Never on a skip."}, s.spendSlot),
		addTool(s.shared, srv, &sdk.Tool{Name: "progress", Annotations: write(),
			Description: "Say what the turn is doing now, in one line: people see the latest notes on the turn's live card in chat."}, s.progress),
		addTool(s.shared, srv, &sdk.Tool{Name: "file_get", Annotations: readOnly,
			Description: "Download a file people sent with a message (inbox_drain's files) or attached to evidence."}, s.fileGet),
		addTool(s.shared, srv, &sdk.Tool{Name: "goal_status", Annotations: readOnly,
			Description: "Read the goal and this agent's status: what needs a person, the live and last turn with its evidence, quota, inbox, next heartbeat."}, s.goalStatus),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *server) shouldRun(ctx context.Context, _ *sdk.CallToolRequest, in ShouldRunIn) (*sdk.CallToolResult, ShouldRunOut, error) {
	const tool = "should_run"
	var out ShouldRunOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	if in.BeginTurn != nil && !*in.BeginTurn {
		if err := s.peek(ctx, tool, &out.Decision); err != nil {
			return nil, out, err
		}
		return s.shouldRunAnswer(ctx, out)
	}

	if s.stateless {
		s.adopt(ctx) // no session remembers the turn: the agent's live turn is the caller's
	}
	s.mu.Lock()
	mine, lease := s.turn, s.lease
	s.mu.Unlock()
	if mine != "" && (in.TurnInstanceID == "" || in.TurnInstanceID == mine) && s.now().Before(lease) {
		// Mid-turn: look without recording; the answer is busy because the turn is ours. A
		// todo named now moves the turn to it while the turn has recorded nothing.
		if in.TodoID != 0 {
			if err := s.bind(ctx, mine, in.TodoID); err != nil {
				return nil, out, explain(tool, s, err)
			}
		}
		if err := s.peek(ctx, tool, &out.Decision); err != nil {
			return nil, out, err
		}
		if out.State == quota.StateBusy {
			return s.shouldRunAnswer(ctx, out)
		}
		s.settle(mine) // the turn ended elsewhere (expired, or settled by another caller)
	}

	s.mu.Lock()
	s.settled = ""
	id := in.TurnInstanceID
	if id == "" {
		if s.pending == "" {
			s.pending = "mcp-" + s.now().UTC().Format("20060102T150405") + "-" + randomHex(4)
		}
		id = s.pending
	}
	s.mu.Unlock()
	body := api.ShouldRunBody{AgentID: s.agent, TurnInstanceID: id, BeginTurn: true, TodoID: in.TodoID, Via: "mcp"}
	// The turn instance id is the replay key of should-run (the body names it).
	if err := s.send(ctx, tool, http.MethodPost, s.goalPath("should-run"), body, s.keyIn(id, tool, body), &out.Decision); err != nil {
		return nil, out, err // a lost answer keeps the pending id: the retry replays by it
	}
	s.mu.Lock()
	if s.pending == id {
		s.pending = ""
	}
	if out.Turn != nil && out.Turn.State == store.TurnLive && s.now().Before(out.Turn.LeaseExpiresAt) {
		s.turn, s.lease, s.todo = out.Turn.InstanceID, out.Turn.LeaseExpiresAt, out.Turn.TodoID
	}
	s.mu.Unlock()
	return s.shouldRunAnswer(ctx, out)
}

// bind moves the session's live turn to todo (POST turns/bind): refused once the turn
// recorded evidence or its spend. The error is the API's, for the caller to explain.
func (s *server) bind(ctx context.Context, turn string, todo int64) error {
	body := api.BindTurnBody{AgentID: s.agent, TurnInstanceID: turn, TodoID: todo}
	raw, err := s.api.Do(ctx, client.Request{Method: http.MethodPost, Path: s.goalPath("turns", "bind"), Body: body,
		IdempotencyKey: s.key(ctx, "turn_bind", body)})
	if err != nil {
		return err
	}
	var t store.Turn
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("decode the server's answer: %w", err)
	}
	s.mu.Lock()
	if s.turn == t.InstanceID {
		s.todo = t.TodoID
	}
	s.mu.Unlock()
	return nil
}

// peek reads the decision without recording anything.
func (s *server) peek(ctx context.Context, tool string, d *quota.Decision) error {
	return s.get(ctx, tool, s.goalPath("quota"), url.Values{"agent_id": {s.agent}}, d)
}

// settle forgets the session's turn id once that turn is over.
func (s *server) settle(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == id {
		s.turn, s.lease, s.todo, s.settled = "", time.Time{}, 0, id
	}
}

// shouldRunAnswer adds the session's turn, the agent's recent gates and the next step.
func (s *server) shouldRunAnswer(ctx context.Context, out ShouldRunOut) (*sdk.CallToolResult, ShouldRunOut, error) {
	s.mu.Lock()
	if s.turn != "" && s.now().Before(s.lease) {
		out.YourTurn = &YourTurn{TurnInstanceID: s.turn, LeaseExpiresAt: s.lease, TodoID: s.todo}
	}
	s.mu.Unlock()
	var gates GatesOut
	if err := s.get(ctx, "should_run", s.goalPath("gates"), url.Values{"limit": {"20"}}, &gates); err != nil {
		return nil, out, err
	}
	out.RecentGates = []store.Gate{}
	for _, g := range gates.Gates {
		if g.AgentID == s.agent && len(out.RecentGates) < 5 {
			out.RecentGates = append(out.RecentGates, g)
		}
	}
	out.NextStep = nextStepFor(out)
	return nil, out, nil
}

func (s *server) todoList(ctx context.Context, _ *sdk.CallToolRequest, in TodoListIn) (*sdk.CallToolResult, TodosOut, error) {
	var out TodosOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	q := url.Values{"status": {"open,blocked"}}
	if in.Status != "" {
		q.Set("status", in.Status)
	}
	if in.Mine {
		q.Set("claimed_by", s.agent)
	}
	if err := s.get(ctx, "todo_list", s.goalPath("todos"), q, &out); err != nil {
		return nil, out, err
	}
	if out.Todos == nil {
		out.Todos = []store.Todo{}
	}
	return nil, out, nil
}

func (s *server) todoAdd(ctx context.Context, _ *sdk.CallToolRequest, in TodoAddIn) (*sdk.CallToolResult, TodoOut, error) {
	const tool = "todo_add"
	var out TodoOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.TodoBody{Text: in.Text, Role: in.Role, Priority: in.Priority, Requires: in.Requires}
	for _, c := range in.Criteria {
		body.Criteria = append(body.Criteria, store.ParseCriterion(c))
	}
	if in.Claim {
		body.ClaimFor = s.agent
	}
	if err := s.send(ctx, tool, http.MethodPost, s.goalPath("todos"), body, s.key(ctx, tool, in), &out.Todo); err != nil {
		return nil, out, err
	}
	s.mu.Lock()
	turn, todo := s.turn, s.todo
	live := turn != "" && s.now().Before(s.lease)
	s.mu.Unlock()
	if !in.Claim || !live || todo == out.Todo.ID {
		return nil, out, nil
	}
	// A task claimed inside a live turn that has recorded nothing is what the turn is for.
	err := s.bind(ctx, turn, out.Todo.ID)
	var ae *api.Error
	switch {
	case err == nil:
		out.NextStep = fmt.Sprintf("Your live turn %s is now on todo %d: work on it, and pass todo_id %d to evidence_add.", turn, out.Todo.ID, out.Todo.ID)
	case errors.As(err, &ae) && ae.Reason == store.ReasonTurnRecorded:
		out.NextStep = fmt.Sprintf("Your live turn %s stays on todo %d: it already recorded evidence. Finish that turn; todo %d waits for the next one (should_run with its todo_id).", turn, todo, out.Todo.ID)
	default:
		return nil, out, explain(tool, s, err)
	}
	return nil, out, nil
}

func (s *server) todoPath(id int64, rest ...string) string {
	return s.goalPath(append([]string{"todos", strconv.FormatInt(id, 10)}, rest...)...)
}

func (s *server) todoClaim(ctx context.Context, _ *sdk.CallToolRequest, in TodoClaimIn) (*sdk.CallToolResult, TodoOut, error) {
	const tool = "todo_claim"
	var out TodoOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.ClaimBody{AgentID: s.agent, Transfer: in.Transfer, LeaseSeconds: in.LeaseSeconds, Note: in.Note, Next: in.Next}
	err := s.send(ctx, tool, http.MethodPost, s.todoPath(in.TodoID, "claim"), body, s.key(ctx, tool, in), &out.Todo)
	return nil, out, err
}

// version returns the version the caller gave, or the todo's current one.
func (s *server) version(ctx context.Context, tool string, todo, given int64) (int64, error) {
	if given != 0 {
		return given, nil
	}
	var t store.Todo
	if err := s.get(ctx, tool, s.todoPath(todo), nil, &t); err != nil {
		return 0, err
	}
	return t.Version, nil
}

func (s *server) todoUpdate(ctx context.Context, _ *sdk.CallToolRequest, in TodoUpdateIn) (*sdk.CallToolResult, TodoOut, error) {
	const tool = "todo_update"
	var out TodoOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	v, err := s.version(ctx, tool, in.TodoID, in.Version)
	if err != nil {
		return nil, out, err
	}
	body := api.TodoUpdateBody{AgentID: s.agent, Version: v, Text: in.Text, Priority: in.Priority, Status: in.Status, ClearClaim: in.Release}
	err = s.send(ctx, tool, http.MethodPatch, s.todoPath(in.TodoID), body, s.key(ctx, tool, in, v), &out.Todo)
	return nil, out, err
}

func (s *server) todoFinish(ctx context.Context, _ *sdk.CallToolRequest, in TodoFinishIn) (*sdk.CallToolResult, TodoOut, error) {
	const tool = "todo_finish"
	var out TodoOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	v, err := s.version(ctx, tool, in.TodoID, in.Version)
	if err != nil {
		return nil, out, err
	}
	body := api.TodoUpdateBody{AgentID: s.agent, Version: v}
	err = s.send(ctx, tool, http.MethodPost, s.todoPath(in.TodoID, "done"), body, s.key(ctx, tool, in, v), &out.Todo)
	return nil, out, err
}

func (s *server) evidenceAdd(ctx context.Context, _ *sdk.CallToolRequest, in EvidenceAddIn) (*sdk.CallToolResult, EvidenceOut, error) {
	const tool = "evidence_add"
	var out EvidenceOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	file, err := s.fileBody(in.FileIn)
	if err != nil {
		return nil, out, err
	}
	body := api.EvidenceBody{AgentID: s.agent, TodoID: in.TodoID, Kind: in.Kind, Summary: in.Summary, Ref: in.Ref, Criteria: in.Criteria, File: file}
	err = s.send(ctx, tool, http.MethodPost, s.goalPath("evidence"), body, s.key(ctx, tool, body), &out.Evidence)
	return nil, out, err
}

func (s *server) gateAsk(ctx context.Context, _ *sdk.CallToolRequest, in GateAskIn) (*sdk.CallToolResult, GateOut, error) {
	const tool = "gate_ask"
	var out GateOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.GateBody{AgentID: s.agent, Question: in.Question, Options: in.Options, TodoID: in.TodoID}
	if err := s.send(ctx, tool, http.MethodPost, s.goalPath("gates"), body, s.key(ctx, tool, in), &out.Gate); err != nil {
		return nil, out, err
	}
	what := "the whole goal"
	if out.Gate.TodoID != 0 {
		what = fmt.Sprintf("todo %d", out.Gate.TodoID)
	}
	out.NextStep = fmt.Sprintf("Gate %d is posted to the goal's owners. Do not do what it asks about until an owner answers; %s waits. "+
		"Work on something else the gate does not cover, or end the turn with refresh_state and spend_slot; should_run and gate_list show the answer.", out.Gate.ID, what)
	return nil, out, nil
}

func (s *server) gateList(ctx context.Context, _ *sdk.CallToolRequest, in GateListIn) (*sdk.CallToolResult, GatesOut, error) {
	var out GatesOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	q := url.Values{}
	if in.Status != "" {
		q.Set("status", in.Status)
	}
	if err := s.get(ctx, "gate_list", s.goalPath("gates"), q, &out); err != nil {
		return nil, out, err
	}
	if out.Gates == nil {
		out.Gates = []store.Gate{}
	}
	return nil, out, nil
}

func (s *server) inboxPath(verb string) string { return s.goalPath("agents", s.agent, "inbox", verb) }

func (s *server) inboxDrain(ctx context.Context, _ *sdk.CallToolRequest, in InboxDrainIn) (*sdk.CallToolResult, api.InboxItems, error) {
	const tool = "inbox_drain"
	var out api.InboxItems
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	s.mu.Lock()
	acks := s.acks
	s.mu.Unlock()
	body := api.DrainBody{Limit: in.Limit}
	err := s.send(ctx, tool, http.MethodPost, s.inboxPath("drain"), body, s.key(ctx, tool, in, s.nonce, acks), &out)
	return nil, out, err
}

func (s *server) inboxAck(ctx context.Context, _ *sdk.CallToolRequest, in InboxAckIn) (*sdk.CallToolResult, api.InboxItems, error) {
	const tool = "inbox_ack"
	var out api.InboxItems
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.AckBody{ItemIDs: in.ItemIDs}
	if err := s.send(ctx, tool, http.MethodPost, s.inboxPath("ack"), body, s.key(ctx, tool, in), &out); err != nil {
		return nil, out, err
	}
	s.mu.Lock()
	s.acks++
	s.mu.Unlock()
	return nil, out, nil
}

func (s *server) inboxReply(ctx context.Context, _ *sdk.CallToolRequest, in InboxReplyIn) (*sdk.CallToolResult, inbox.ReplyResult, error) {
	const tool = "inbox_reply"
	var out inbox.ReplyResult
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	file, err := s.fileBody(in.FileIn)
	if err != nil {
		return nil, out, err
	}
	body := api.ReplyBody{ItemID: in.ItemID, Text: in.Text, File: file}
	err = s.send(ctx, tool, http.MethodPost, s.inboxPath("reply"), body, s.key(ctx, tool, body), &out)
	return nil, out, err
}

func (s *server) progress(ctx context.Context, _ *sdk.CallToolRequest, in ProgressIn) (*sdk.CallToolResult, store.TurnNote, error) {
	const tool = "progress"
	var out store.TurnNote
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.ProgressBody{TurnInstanceID: s.turnFor(ctx, ""), Text: in.Text}
	err := s.send(ctx, tool, http.MethodPost, s.goalPath("agents", s.agent, "progress"), body, s.key(ctx, tool, body, s.now().UnixNano()), &out)
	return nil, out, err
}

// fileBody reads a tool's file: from this machine when allowed, else from its base64.
func (s *server) fileBody(in FileIn) (*api.FileBody, error) {
	switch {
	case in.FilePath != "" && !s.localFiles:
		return nil, toolInputError("file_path", "this MCP endpoint is not on the agent's machine; send file_name and content_base64 instead")
	case in.FilePath != "":
		f, err := api.FileBodyOf(in.FilePath, 1<<30)
		if err != nil {
			return nil, toolInputError("file_path", err.Error())
		}
		return f, nil
	case in.ContentBase64 != "" || in.FileName != "":
		if in.FileName == "" || in.ContentBase64 == "" {
			return nil, toolInputError("file_name", "give both file_name and content_base64")
		}
		return &api.FileBody{Name: in.FileName, ContentBase64: in.ContentBase64}, nil
	}
	return nil, nil
}

func (s *server) fileGet(ctx context.Context, _ *sdk.CallToolRequest, in FileGetIn) (*sdk.CallToolResult, FileGetOut, error) {
	out := FileGetOut{FileID: in.FileID}
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	if in.FileID <= 0 {
		return nil, out, toolInputError("file_id", "give the file's id (files[].file_id)")
	}
	if in.SaveTo != "" && !s.localFiles {
		return nil, out, toolInputError("save_to", "this MCP endpoint is not on the agent's machine; leave save_to out to get the content in base64")
	}
	raw, err := s.api.Do(ctx, client.Request{Method: http.MethodGet, Path: "/v1/files/" + strconv.FormatInt(in.FileID, 10)})
	if err != nil {
		return nil, out, explain("file_get", s, err)
	}
	sum := sha256.Sum256(raw)
	out.Size, out.SHA256 = len(raw), hex.EncodeToString(sum[:])
	if in.SaveTo != "" {
		if err := os.WriteFile(in.SaveTo, raw, 0o644); err != nil {
			return nil, out, toolInputError("save_to", err.Error())
		}
		out.Path = in.SaveTo
		return nil, out, nil
	}
	out.ContentBase64 = base64.StdEncoding.EncodeToString(raw)
	return nil, out, nil
}

// turnFor is the turn a settling call names: the one given, else the session's (adopting the
// agent's live turn when this process does not know one: the host restarted it).
func (s *server) turnFor(ctx context.Context, given string) string {
	if given != "" {
		return given
	}
	s.adopt(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn
}

func (s *server) refreshState(ctx context.Context, _ *sdk.CallToolRequest, in RefreshStateIn) (*sdk.CallToolResult, RefreshStateOut, error) {
	const tool = "refresh_state"
	var out RefreshStateOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.RefreshBody{AgentID: s.agent, TurnInstanceID: s.turnFor(ctx, in.TurnInstanceID), NextAction: in.NextAction}
	if h := in.Handoff; h != nil {
		body.Handoff = &store.TurnHandoff{To: h.ToAgent, Kind: h.Kind, TodoID: h.TodoID, Done: h.Done, Next: h.Next, Questions: h.Questions}
	}
	var res store.RefreshResult
	if err := s.send(ctx, tool, http.MethodPost, s.goalPath("refresh-state"), body, s.key(ctx, tool, body), &res); err != nil {
		return nil, out, err
	}
	out.Entry, out.Handoff = res.LedgerEntry, res.Handoff
	return nil, out, nil
}

func (s *server) todoHandoff(ctx context.Context, _ *sdk.CallToolRequest, in TodoHandoffIn) (*sdk.CallToolResult, HandoffOut, error) {
	const tool = "todo_handoff"
	var out HandoffOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	body := api.HandoffBody{ToAgent: in.ToAgent, Kind: in.Kind, Done: in.Done, Next: in.Next, Questions: in.Questions, EvidenceIDs: in.EvidenceIDs}
	if err := s.send(ctx, tool, http.MethodPost, s.todoPath(in.TodoID, "handoff"), body, s.key(ctx, tool, in), &out.Handoff); err != nil {
		return nil, out, err
	}
	h := out.Handoff
	if h.To == s.agent {
		out.NextStep = fmt.Sprintf("Handoff %d is recorded for your own next turn: its should_run carries it as its continuation.", h.ID)
		return nil, out, nil
	}
	out.NextStep = fmt.Sprintf("Todo %d is now agent %s's: its next should_run carries handoff %d as its continuation until it acknowledges it. "+
		"Do no more work on that todo; end your turn with refresh_state and spend_slot.", h.TodoID, h.To, h.ID)
	return nil, out, nil
}

func (s *server) acknowledge(ctx context.Context, _ *sdk.CallToolRequest, in AcknowledgeIn) (*sdk.CallToolResult, store.Ack, error) {
	const tool = "acknowledge"
	var out store.Ack
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	if (in.HandoffID == 0) == (in.DecisionID == 0) {
		return nil, out, toolInputError("handoff_id", "give one of handoff_id (a continuation) or decision_id (an objective change)")
	}
	body := api.AcknowledgeBody{HandoffID: in.HandoffID, DecisionID: in.DecisionID}
	err := s.send(ctx, tool, http.MethodPost, s.goalPath("agents", s.agent, "ack"), body, s.key(ctx, tool, in), &out)
	return nil, out, err
}

func (s *server) spendSlot(ctx context.Context, _ *sdk.CallToolRequest, in SpendSlotIn) (*sdk.CallToolResult, SpendSlotOut, error) {
	const tool = "spend_slot"
	var out SpendSlotOut
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	turn := s.turnFor(ctx, in.TurnInstanceID)
	if turn == "" {
		// A repeated spend for the turn this session settled answers that turn's receipt.
		s.mu.Lock()
		turn = s.settled
		s.mu.Unlock()
	}
	if turn == "" && s.stateless {
		// Without a session, a repeated spend names the turn an earlier request settled: the
		// server answers its receipt again.
		if t, err := s.latestTurn(ctx); err == nil && t != nil && t.Spent {
			turn = t.InstanceID
		}
	}
	if turn == "" {
		return nil, out, fmt.Errorf("%s failed: this session has no open turn. Next: spend only for a turn that should_run opened with a run answer; "+
			"if should_run answered skip, end the turn without spending. Pass turn_instance_id only to settle a turn another session opened", tool)
	}
	body := api.SpendBody{AgentID: s.agent, TurnInstanceID: turn, TodoID: in.TodoID}
	if err := s.send(ctx, tool, http.MethodPost, s.goalPath("spend-slot"), body, s.key(ctx, tool, body), &out.Receipt); err != nil {
		return nil, out, err
	}
	s.settle(turn)
	return nil, out, nil
}

func (s *server) goalStatus(ctx context.Context, _ *sdk.CallToolRequest, _ GoalStatusIn) (*sdk.CallToolResult, api.Status, error) {
	var out api.Status
	if err := s.connected(ctx); err != nil {
		return nil, out, err
	}
	err := s.get(ctx, "goal_status", s.goalPath("status"), url.Values{"agent_id": {s.agent}}, &out)
	return nil, out, err
}
