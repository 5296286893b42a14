package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"loopx/quota"
	"loopx/scheduler"
	"loopx/store"
	"loopx/templates"
)

// Packet is what a runner hands the agent for one turn: on stdin (exec) or as the request
// body (webhook). ShouldRun is the full should-run answer that opened the turn; Contract,
// Continuation and ObjectiveChanged are its members of the same names, at the top where an
// agent looks first.
type Packet struct {
	Version        string         `json:"version"` // "loopx_turn_packet_v1"
	URL            string         `json:"loopx_url"`
	GoalID         string         `json:"goal_id"`
	AgentID        string         `json:"agent_id"`
	TurnID         int64          `json:"turn_id"`
	TurnInstanceID string         `json:"turn_instance_id"`
	Deadline       time.Time      `json:"deadline"`
	Goal           PacketGoal     `json:"goal"`
	ShouldRun      quota.Decision `json:"should_run"`
	// Contract is what the agent works under: objective, scope (editable and protected
	// paths, notes), capabilities (the goal's and the agent's), the goal's criteria.
	Contract *store.Contract `json:"contract"`
	// Continuation is the handoff to the agent it has not acknowledged (loopx ack
	// --handoff-id), ObjectiveChanged the replan it has not (loopx ack --decision-id).
	Continuation     *store.Handoff         `json:"continuation,omitempty"`
	ObjectiveChanged *quota.ObjectiveChange `json:"objective_changed,omitempty"`
	Commands         []string               `json:"commands"`
	Prompt           string                 `json:"prompt"`
	// Files are the images and files people sent with the messages waiting in the agent's
	// inbox: download each from its url with the turn's token (inbox drain returns them
	// with their items too).
	Files []store.Attachment `json:"files,omitempty"`
}

// PacketGoal is the goal as the agent sees it.
type PacketGoal struct {
	Title     string `json:"title"`
	Objective string `json:"objective"`
	Lang      string `json:"lang"`
}

// GoalReader reads the goal a turn works on. *store.Store implements it.
type GoalReader interface {
	GetGoal(ctx context.Context, id string) (store.Goal, error)
}

// TokenIssuer issues the per-turn token handed to the agent. *store.Store implements it.
type TokenIssuer interface {
	IssueTurnToken(ctx context.Context, turn store.Turn, expires time.Time) (string, error)
}

// SecretReader opens an agent's runner settings with their secrets, which no other surface
// reads. *store.Store implements it.
type SecretReader interface {
	RunnerConfig(ctx context.Context, goalID, agentID string) (json.RawMessage, error)
}

// FileLister lists the files of the messages waiting for an agent. *store.Store implements it.
type FileLister interface {
	PendingFiles(ctx context.Context, goalID, agentID string) ([]store.Attachment, error)
}

// Base is what every runner needs to prepare a turn.
type Base struct {
	URL       string // LOOPX_URL the agent calls back on
	Goals     GoalReader
	Tokens    TokenIssuer
	Templates *templates.Set
	// Secrets opens the runner secrets (a webhook's signing secret, an exec agent's env).
	// Nil: the schedule's settings are used as they are, without secrets.
	Secrets SecretReader
	// Files lists the files waiting in the agent's inbox for the packet; nil lists none.
	Files FileLister
}

// runnerConfig is the agent's runner settings with its secrets, read when the turn starts.
func (b Base) runnerConfig(ctx context.Context, job scheduler.Job) (json.RawMessage, error) {
	if b.Secrets == nil {
		return job.Schedule.RunnerConfig, nil
	}
	return b.Secrets.RunnerConfig(ctx, job.Turn.GoalID, job.Turn.AgentID)
}

// Commands lists the per-turn CLI calls (docs/agents.md, "The turn") with this turn's ids
// filled in: first the acknowledgements the answer asks for, the evidence naming the todo's
// unmet criteria, and the handoff of the todo to another agent.
func Commands(d quota.Decision, turnInstanceID string) []string {
	g, a, t := d.GoalID, d.AgentID, turnInstanceID
	todo := "X"
	criteria := ""
	if d.SelectedTodo != nil {
		todo = strconv.FormatInt(d.SelectedTodo.ID, 10)
		for _, c := range store.Unmet(d.SelectedTodo.Criteria) {
			criteria += " --criterion " + c.ID
		}
	}
	var out []string
	if c := d.Continuation; c != nil {
		out = append(out, "loopx ack --goal-id "+g+" --agent-id "+a+" --handoff-id "+strconv.FormatInt(c.ID, 10))
	}
	if oc := d.ObjectiveChanged; oc != nil {
		out = append(out, "loopx ack --goal-id "+g+" --agent-id "+a+" --decision-id "+strconv.FormatInt(oc.DecisionID, 10))
	}
	return append(out,
		"loopx inbox drain --goal-id "+g+" --agent-id "+a,
		"loopx todo claim --goal-id "+g+" --todo-id "+todo+" --agent-id "+a,
		"loopx todo update --goal-id "+g+" --todo-id "+todo+" --agent-id "+a+" --status done",
		"loopx evidence add --goal-id "+g+" --agent-id "+a+" --todo-id "+todo+criteria+" --summary '...'",
		"loopx gate ask --goal-id "+g+" --agent-id "+a+" --question '...' --option approve --option reject",
		"loopx inbox reply --goal-id "+g+" --agent-id "+a+" --item N --text '...'",
		"loopx todo handoff --goal-id "+g+" --todo-id "+todo+" --agent-id "+a+" --to AGENT --note '...' --next '...'",
		"loopx refresh-state --goal-id "+g+" --agent-id "+a+" --turn-instance-id "+t+" --next-action '...'",
		"loopx quota spend-slot --goal-id "+g+" --agent-id "+a+" --turn-instance-id "+t+" --todo-id "+todo,
	)
}

// prepare builds the turn packet and the prompt, and issues the turn token (valid until the
// turn's lease ends).
func (b Base) prepare(ctx context.Context, job scheduler.Job, deadline time.Time) (Packet, string, error) {
	goal, err := b.Goals.GetGoal(ctx, job.Turn.GoalID)
	if err != nil {
		return Packet{}, "", fmt.Errorf("read goal: %w", err)
	}
	token, err := b.Tokens.IssueTurnToken(ctx, job.Turn, job.Turn.LeaseExpiresAt)
	if err != nil {
		return Packet{}, "", fmt.Errorf("issue turn token: %w", err)
	}
	p := Packet{
		Version: "loopx_turn_packet_v1", URL: b.URL, GoalID: job.Turn.GoalID, AgentID: job.Turn.AgentID,
		TurnID: job.Turn.ID, TurnInstanceID: job.Turn.InstanceID, Deadline: deadline,
		Goal:      PacketGoal{Title: goal.Title, Objective: goal.Objective, Lang: goal.Lang},
		ShouldRun: job.Decision, Commands: Commands(job.Decision, job.Turn.InstanceID),
		Contract: job.Decision.Contract, Continuation: job.Decision.Continuation, ObjectiveChanged: job.Decision.ObjectiveChanged,
	}
	if b.Files != nil {
		files, err := b.Files.PendingFiles(ctx, job.Turn.GoalID, job.Turn.AgentID)
		if err != nil {
			return Packet{}, "", fmt.Errorf("list inbox files: %w", err)
		}
		for i := range files {
			files[i].URL = store.FileURL(b.URL, files[i].ID)
		}
		p.Files = files
	}
	d := job.Decision
	data := d.PromptData()
	for k, v := range map[string]any{"AgentID": p.AgentID, "GoalID": p.GoalID, "GoalTitle": goal.Title,
		"TurnInstanceID": p.TurnInstanceID, "Deadline": deadline.UTC().Format(time.RFC3339), "Objective": goal.Objective,
		"Commands": p.Commands, "Via": "cli"} {
		data[k] = v
	}
	p.Prompt, err = b.Templates.Text(goal.Lang, "turn_prompt", data)
	if err != nil {
		return Packet{}, "", fmt.Errorf("render turn prompt: %w", err)
	}
	return p, token, nil
}
