package store

// GoalDefaults are the machine defaults of the goal settings a goal may leave unset (NULL in
// its row): loopx serve reads them from its configuration and gives them to the Store
// (Options.GoalDefaults), and every reader of an effective setting goes through the Goal
// methods below, so a goal's own value, when set, always wins.
type GoalDefaults struct {
	// BreakerFailures: failed or empty turns in a row before an agent is held; 0 = off.
	BreakerFailures int
	// ProgressCard: a live progress card in chat while exec and MCP turns run.
	ProgressCard bool
	// QuietDigests: a scheduled digest with nothing new is not sent.
	QuietDigests bool
}

// DefaultGoalDefaults are the defaults when the machine sets none: the breaker after 3
// failures, progress cards on, quiet digests on.
func DefaultGoalDefaults() GoalDefaults {
	return GoalDefaults{BreakerFailures: 3, ProgressCard: true, QuietDigests: true}
}

// Breaker is the goal's effective breaker threshold (0 = off).
func (g Goal) Breaker(d GoalDefaults) int { return orDefault(g.BreakerFailures, d.BreakerFailures) }

// Quiet tells whether a scheduled digest with nothing new is skipped.
func (g Goal) Quiet(d GoalDefaults) bool { return orDefault(g.QuietDigests, d.QuietDigests) }

// ProgressCardFor tells whether a turn reached through via (exec, webhook, mcp, cli, run) gets
// a live progress card: always when the goal turned cards on, never when it turned them off;
// by default (the machine's) for exec and MCP turns, whose output or tools report progress.
func (g Goal) ProgressCardFor(d GoalDefaults, via string) bool {
	if g.ProgressCard != nil {
		return *g.ProgressCard
	}
	return d.ProgressCard && (via == "exec" || via == "mcp")
}

// SettingMark says whether a goal's setting is its own value or the machine default, for
// surfaces that show both ("3 (default)").
func SettingMark[T any](v *T) string {
	if v == nil {
		return "default"
	}
	return "set"
}

// setting applies one change to a nullable setting: back to the default, a new value, or
// unchanged.
func setting[T any](cur, v *T, toDefault bool) *T {
	switch {
	case toDefault:
		return nil
	case v != nil:
		c := *v
		return &c
	}
	return cur
}

func checkOptRange(field string, v *int, lo, hi int) error {
	if v == nil {
		return nil
	}
	return checkRange(field, *v, lo, hi)
}

// GoalDefaults returns the machine defaults this Store was opened with.
func (s *Store) GoalDefaults() GoalDefaults { return s.defaults }
