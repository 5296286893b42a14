package store

import (
	"context"
	"errors"
)

// errTodo marks operations whose bodies land in the following commits.
var errTodo = errors.New("not implemented yet")

// CreateGoal creates a goal, validating ids, text lengths, quota, cron specs and zones.
func (s *Store) CreateGoal(ctx context.Context, p CreateGoalParams) (Goal, error) {
	return Goal{}, errTodo
}

// GetGoal returns one goal or ErrNotFound.
func (s *Store) GetGoal(ctx context.Context, id string) (Goal, error) { return Goal{}, errTodo }

// ListGoals lists goals ordered by id.
func (s *Store) ListGoals(ctx context.Context, p ListGoalsParams) ([]Goal, error) {
	return nil, errTodo
}

// UpdateGoal changes a goal with compare-and-set on its version.
func (s *Store) UpdateGoal(ctx context.Context, p UpdateGoalParams) (Goal, error) {
	return Goal{}, errTodo
}

// StopGoal pauses a goal: should-run answers paused until ResumeGoal.
func (s *Store) StopGoal(ctx context.Context, p GoalRef) (Goal, error) { return Goal{}, errTodo }

// ResumeGoal reactivates a stopped goal.
func (s *Store) ResumeGoal(ctx context.Context, p GoalRef) (Goal, error) { return Goal{}, errTodo }

// RegisterAgent registers an agent and returns its token once.
func (s *Store) RegisterAgent(ctx context.Context, p RegisterAgentParams) (RegisteredAgent, error) {
	return RegisteredAgent{}, errTodo
}

// RotateAgentToken replaces an agent's token and returns the new one once.
func (s *Store) RotateAgentToken(ctx context.Context, p AgentRef) (RegisteredAgent, error) {
	return RegisteredAgent{}, errTodo
}

// GetAgent returns one agent or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, goalID, agentID string) (Agent, error) {
	return Agent{}, errTodo
}

// ListAgents lists a goal's agents.
func (s *Store) ListAgents(ctx context.Context, goalID string) ([]Agent, error) { return nil, errTodo }

// AgentByToken finds the agent a bearer token belongs to, or ErrNotFound.
func (s *Store) AgentByToken(ctx context.Context, token string) (Agent, error) {
	return Agent{}, errTodo
}

// AddTodo adds a todo.
func (s *Store) AddTodo(ctx context.Context, p AddTodoParams) (Todo, error) { return Todo{}, errTodo }

// GetTodo returns one todo or ErrNotFound.
func (s *Store) GetTodo(ctx context.Context, goalID string, id int64) (Todo, error) {
	return Todo{}, errTodo
}

// ListTodos lists todos by priority then id.
func (s *Store) ListTodos(ctx context.Context, p ListTodosParams) ([]Todo, error) {
	return nil, errTodo
}

// ClaimTodo claims a todo; another agent's live claim is never overwritten without Transfer.
func (s *Store) ClaimTodo(ctx context.Context, p ClaimTodoParams) (Todo, error) {
	return Todo{}, errTodo
}

// UpdateTodo changes a todo with compare-and-set on its version.
func (s *Store) UpdateTodo(ctx context.Context, p UpdateTodoParams) (Todo, error) {
	return Todo{}, errTodo
}

// AskGate opens an owner gate.
func (s *Store) AskGate(ctx context.Context, p AskGateParams) (Gate, error) { return Gate{}, errTodo }

// AnswerGate approves or rejects an open gate.
func (s *Store) AnswerGate(ctx context.Context, p AnswerGateParams) (Gate, error) {
	return Gate{}, errTodo
}

// CancelGate withdraws an open gate.
func (s *Store) CancelGate(ctx context.Context, p CancelGateParams) (Gate, error) {
	return Gate{}, errTodo
}

// GetGate returns one gate or ErrNotFound.
func (s *Store) GetGate(ctx context.Context, goalID string, id int64) (Gate, error) {
	return Gate{}, errTodo
}

// ListGates lists a goal's gates, newest first.
func (s *Store) ListGates(ctx context.Context, p ListGatesParams) ([]Gate, error) {
	return nil, errTodo
}

// AddEvidence records evidence and marks the live turn as having progress.
func (s *Store) AddEvidence(ctx context.Context, p AddEvidenceParams) (Evidence, error) {
	return Evidence{}, errTodo
}

// ListEvidence lists evidence, oldest first.
func (s *Store) ListEvidence(ctx context.Context, p ListEvidenceParams) ([]Evidence, error) {
	return nil, errTodo
}

// OpenTurn opens a live turn; a second live turn for the same goal x agent is ErrConflict.
func (s *Store) OpenTurn(ctx context.Context, p OpenTurnParams) (Turn, error) { return Turn{}, errTodo }

// EndTurn ends a live turn as ok or failed.
func (s *Store) EndTurn(ctx context.Context, p EndTurnParams) (Turn, error) { return Turn{}, errTodo }

// ExpireTurns marks every live turn whose lease has passed as abandoned and returns them.
func (s *Store) ExpireTurns(ctx context.Context) ([]Turn, error) { return nil, errTodo }

// SpendSlot debits one slot for a turn exactly once.
func (s *Store) SpendSlot(ctx context.Context, p SpendSlotParams) (SpendReceipt, error) {
	return SpendReceipt{}, errTodo
}

// RefreshState writes a quota-neutral state_refreshed ledger row.
func (s *Store) RefreshState(ctx context.Context, p RefreshStateParams) (LedgerEntry, error) {
	return LedgerEntry{}, errTodo
}

// ListAudit lists audit rows, oldest first.
func (s *Store) ListAudit(ctx context.Context, p ListAuditParams) ([]Audit, error) {
	return nil, errTodo
}
