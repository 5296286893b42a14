// Package change is the kernel of protected changes: it turns a request to change a goal or
// an agent (budget and window, pause and resume, heartbeat and report schedules and zones,
// owners and members, stall guard, an agent's runner, work mode and default flag) into a
// typed proposal, and applies a proposal when someone allowed confirms it. Chat, the web
// workspace, the HTTP API and the CLI all call it; none of them computes a diff itself.
//
// Guarantees:
//   - A proposal is stored with its normalized parameters, the diff of every field it changes
//     (before → after), its effects (typed, worded per language by Words), the goal version
//     it was computed against, who proposed it and an expiry (store.ProposalTTL).
//   - Only a person whose role (the SQL rule loopx_role, read through store.GetGoalAs) meets
//     the change's need may propose or confirm it: owners for goal settings and an agent's
//     work mode and default flag, admins for an agent's runner. The confirmer may differ from
//     the proposer. A refusal changes nothing and is audited.
//   - Confirmation applies the change only while the goal is still at the proposal's version,
//     in one transaction with the proposal's new state, its audit row (proposer, confirmer,
//     applied diff) and the card updates of its chat cards. A goal that moved on makes the
//     proposal stale and the answer carries a fresh proposal of the same change; an expired,
//     cancelled or already settled proposal never applies.
//   - Every call goes through store.Do: the same idempotency key with the same request
//     replays the first answer, another request under it is a conflict.
//   - Apply (admin scripts) proposes and confirms in one transaction: the same record, diff
//     and audit row as a confirmed proposal.
package change
