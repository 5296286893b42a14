// Package quota answers `quota should-run`: whether an agent should act now, and what the
// scheduler should do next.
//
// Guarantees:
//   - Decide is a pure function of a snapshot and the clock. Its order is LoopX's: paused
//     (stopped goal or zero quota; nothing overrides it), stop (an owner stopped the live
//     turn: a host's turn is ended here as stopped, a runner's by its runner), held (the
//     breaker held the agent after failed or empty turns in a row, or an owner paused it;
//     the hint holds the heartbeat until an owner resumes it), busy (a live turn), throttled (the
//     rolling window is spent; next_eligible_at is when a slot frees), inbox (pending items
//     for the agent run a reply turn even while its todo waits on a gate), waiting (an owner
//     gate blocks all remaining work), idle (no runnable todo), stalled (goal.stall_turns
//     ended turns in a row without progress), eligible (the highest-priority runnable todo).
//   - Service.ShouldRun reads the snapshot in one SQL statement and records the answer in the
//     same transaction: a tick_decision ledger row, the scheduler-hint progression, at most
//     one open stall gate, and with BeginTurn a turn holding a lease. A skip never spends.
//   - The same turn instance id replays the stored answer (identical JSON) and writes nothing.
//   - The scheduler hint follows LoopX's table (run_now 3→10 min, backoff_waiting_for_user and
//     backoff_until_state_change 30→120, stop_until_explicit_resume when paused); the interval
//     doubles while the decision's identity (state, reason, selected todo, blocking gates)
//     stays the same and resets when it changes.
package quota
