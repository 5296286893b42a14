package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loopx/api"
	"loopx/quota"
	"loopx/store"
	"loopx/templates"
)

// Resource URIs.
const (
	GoalURI  = "loopx://goal"
	StateURI = "loopx://state"
)

// GoalContract is the goal as an agent reads it: what it is for, who decides, its budget and
// its schedules; its contract (scope, capabilities, acceptance criteria and which are met);
// every setting with its source (default: the machine default; override: the goal's own).
type GoalContract struct {
	GoalID    string               `json:"goal_id"`
	AgentID   string               `json:"agent_id"`
	Goal      store.Goal           `json:"goal"`
	Contract  store.Contract       `json:"contract"`
	Settings  []store.SettingValue `json:"settings"`
	TurnRules []string             `json:"turn_rules"`
}

// turnRules is the tick contract in short, the same for every goal (the loop contract's steps
// in templates.LoopSteps say it in full).
var turnRules = []string{
	"A LoopX turn (the /loopx command, a heartbeat) starts with should_run (todo_id: the task's todo) and works only when it answers should_run=true.",
	"Work on the turn's todo (your_turn.todo_id); never take another agent's claim without being asked.",
	"Keep to the contract: change only paths in contract.scope.editable (all, when it lists none), never touch contract.scope.protected, keep to contract.scope.notes; a todo needing a capability you lack (contract.capabilities.agent) is not yours.",
	"Read a continuation (a handoff to you) and an objective_changed before you start, and acknowledge each (acknowledge with handoff_id, decision_id).",
	"Answer people first when inbox.pending > 0: inbox_drain, inbox_reply, inbox_ack.",
	"Record what you produced with evidence_add, naming in criteria the acceptance criteria it shows met: a todo with criteria is finished only once each is named; a turn without evidence counts towards the stall guard.",
	"Need an owner's decision? gate_ask, and do not do the gated thing until an owner answers.",
	"End with refresh_state (what the next turn should do, and a handoff when work remains: done, next, questions, to_agent) and spend_slot, once, after the work is validated; never spend on a skip.",
	"Stop when should_run answers state done: the goal is finished until an owner reopens it.",
	"Pace a recurring loop by scheduler_hint.interval_minutes; stop the loop on stop_until_explicit_resume.",
}

func (s *server) addResources(srv *sdk.Server) {
	srv.AddResource(&sdk.Resource{URI: GoalURI, Name: "goal", Title: "LoopX goal contract", MIMEType: "application/json",
		Description: "The goal this project works on: objective, owners, quota policy, schedules, its contract (scope, capabilities, acceptance criteria), every setting marked default or override, and the turn rules."},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			if err := s.connected(ctx); err != nil {
				return nil, rpcError(err)
			}
			var g api.GoalAnswer
			if err := s.get(ctx, "read "+GoalURI, s.goalPath(), nil, &g); err != nil {
				return nil, rpcError(err)
			}
			c := GoalContract{GoalID: s.goal, AgentID: s.agent, Goal: g.Goal, Contract: g.Contract, Settings: g.Settings, TurnRules: turnRules}
			return jsonResource(req.Params.URI, c)
		})
	srv.AddResource(&sdk.Resource{URI: StateURI, Name: "state", Title: "LoopX state", MIMEType: "application/json",
		Description: "The current state for this agent: the decision should_run would give, open gates, turns, evidence, quota, inbox."},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			if err := s.connected(ctx); err != nil {
				return nil, rpcError(err)
			}
			var st api.Status
			if err := s.get(ctx, "read "+StateURI, s.goalPath("status"), url.Values{"agent_id": {s.agent}}, &st); err != nil {
				return nil, rpcError(err)
			}
			return jsonResource(req.Params.URI, st)
		})
}

// rpcError is the JSON-RPC error of a resource or prompt that failed (a tool's failures are
// tool results instead): the SDK would send a plain error with code 0, which JSON-RPC does
// not allow. -32000 is the start of the range the specification leaves to servers.
func rpcError(err error) error {
	return &jsonrpc.Error{Code: codeServerError, Message: err.Error()}
}

// codeServerError is the JSON-RPC code of every error the server itself answers.
const codeServerError = -32000

func jsonResource(uri string, v any) (*sdk.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", uri, err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// addPrompts registers "turn": the turn prompt the exec runner renders, for the current state
// and with the MCP tools in place of the CLI commands.
func (s *server) addPrompts(srv *sdk.Server) {
	srv.AddPrompt(&sdk.Prompt{Name: "turn", Title: "LoopX turn",
		Description: "One LoopX-governed turn on this project's goal, for its current state.",
		Arguments:   []*sdk.PromptArgument{{Name: "task", Description: "what the user wants done in this turn (optional)"}}},
		func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			if err := s.connected(ctx); err != nil {
				return nil, rpcError(err)
			}
			text, err := s.turnPrompt(ctx, req.Params.Arguments["task"])
			if err != nil {
				return nil, rpcError(err)
			}
			return &sdk.GetPromptResult{Description: "LoopX turn for goal " + s.goal,
				Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text}}}}, nil
		})
}

// turnPrompt renders the turn_prompt template over the read-only decision.
func (s *server) turnPrompt(ctx context.Context, task string) (string, error) {
	var goal store.Goal
	if err := s.get(ctx, "turn prompt", s.goalPath(), nil, &goal); err != nil {
		return "", err
	}
	var d quota.Decision
	if err := s.peek(ctx, "turn prompt", &d); err != nil {
		return "", err
	}
	data := d.PromptData()
	for k, v := range map[string]any{"AgentID": s.agent, "GoalID": s.goal, "GoalTitle": goal.Title, "TurnInstanceID": "",
		"Deadline": "", "Objective": goal.Objective, "Commands": []string(nil), "Via": "mcp"} {
		data[k] = v
	}
	text, err := s.tpl.Text(goal.Lang, "turn_prompt", data)
	if err != nil {
		return "", fmt.Errorf("render turn prompt: %w", err)
	}
	named := "none given"
	if task != "" {
		named = strconv.Quote(task)
	}
	return strings.TrimRight(text, "\n") + "\n\n" + templates.LoopSteps(templates.LoopCall{Command: "/loopx", Task: named}), nil
}
