// Package scheduler fires the cron schedules of goals (per goal×agent heartbeats and per
// goal report digests), reminds owners of open gates, and wakes agents through their runners.
//
// Guarantees:
//
//   - Exactly one tick row per (schedule, fire time). A replica claims a batch of due
//     schedules in one statement (FOR UPDATE SKIP LOCKED, then a short lease), asks should-run
//     for them with no transaction open, and settles the ones it still holds in one
//     transaction: their tick rows, their next fire, the digests due. Any number of replicas
//     fire each time once; a replica that dies mid-batch leaves its schedules due again when
//     the lease lapses (30 s), and the next claimant replays the same fire times (should-run
//     answers the same turn instance), so a turn is started by one replica only.
//   - No silent gaps. Each tick records the fire planned after it (next_fire_at); every fire
//     time either gets a ran/due/skipped tick or a missed row. After downtime at most one catch-up
//     tick per schedule runs (the newest passed fire); the older passed fires are recorded as
//     missed, never replayed.
//   - Fire times are wall-clock times in the schedule's IANA zone (robfig/cron parses the
//     spec). A time in a daylight-saving gap fires once when the gap ends; a repeated time
//     fires once, at its first occurrence.
//   - A heartbeat asks should-run. For exec and webhook agents, run opens a turn (with a
//     lease) and wakes the agent through its runner after the transaction commits, and the
//     turn instance id is derived from (schedule, fire time), so a retried batch replays the
//     same answer and turn; skip records the reason. While a turn is live the answer is busy:
//     the tick is skipped, never queued. The next fire is the first cron time at or after
//     now + the scheduler_hint interval; stop_until_explicit_resume holds the heartbeat until
//     the goal is resumed (or its budget or schedule changes). Poll agents' hosts ask
//     should-run themselves and own the hint progression: their ticks record a read-only
//     answer (quota.Peek) and keep the cron cadence. Such a tick starts
//     nothing, so a run answer is recorded as due (the host learns it at its next poll),
//     never as ran.
//   - A new todo, an inbox message or an answered gate re-arms the goal's heartbeats (a
//     trigger), so work arriving during a long backoff is picked up at the next cron time.
//   - Each goal's schedules are delayed by a deterministic phase in [0, MaxJitter), below the
//     schedule's shortest interval and the same on every replica (like Jenkins' H), so goals
//     sharing a spec do not burst; SpreadInterval spreads them over the whole interval.
//   - Report digests: one per (goal, window end), whatever the replicas and restarts.
//   - Gate reminders back off (30, 60, 120 minutes, then every 120), deduplicated by gate and
//     reminder number, and escalate to every owner by direct message from the Nth; a gate is
//     never expired or answered by the scheduler.
//   - Turn cards and the breaker (TurnCards): every Step, and right after a runner's turn
//     ended, the turns with card work are locked (SKIP LOCKED) and moved on in one
//     transaction per batch: a live progress card posted when the turn opens (the goal's
//     progress_card, else the machine default for exec and MCP turns), updated in place when
//     notes come, at most once per CardRefresh (5 s) per chat, ending with the outcome; a
//     failure card for a failed, timed-out or empty turn that had none; after the goal's
//     breaker_failures failures in a row, one hold of the agent (audited) and one breaker card.
//     Dedupe keys make every row once, whatever the replicas.
//   - Heartbeats fired now (run_request) are claimed like schedules, asked of should-run
//     under the turn instance id run-<id> (a replay opens no second turn), answered in their
//     chat, and their turn started once the answer committed.
//   - A stop request reaches the runner of the turn on this replica (NOTIFY loopx_turn_stop,
//     and a poll every StopPoll): its context ends with a *Stop cause and the turn ends as
//     stopped.
//   - Quiet digests: a scheduled digest with nothing new is recorded quiet and not sent when
//     the goal's quiet_digests (else the machine default) says so; the next one says how
//     long it was quiet.
//
// The loop sleeps until the earliest next_run_at (or the next reminder) and is woken early by
// NOTIFY loopx_schedule, which triggers on goal, agent, todo, inbox and gate changes send.
package scheduler
