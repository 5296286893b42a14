// Package store holds every SQL statement of LoopX: the embedded migrations, the record
// types, and the operations on the durable state in PostgreSQL.
//
// Guarantees:
//   - One operation, one transaction: the state change, its audit row, its idempotency
//     receipt and any outbox rows (from the caller's Notice callback) commit together or not
//     at all. No transaction is held across a network call.
//   - One executor: every statement runs on a DB, the pool or one open transaction (*Tx,
//     *ShouldRunTx). A caller joins a transaction only explicitly (Store.In(tx), or a DB
//     argument); side-effect callbacks (NoticeFunc) are handed the transaction's executor.
//     Inside a transaction nothing takes a second pool connection, so a burst that holds every
//     connection cannot wait on itself; acquiring a connection waits only as long as the
//     caller's context. Only this package imports pgx.
//   - Bad input is refused before anything is written, with a *Error whose Kind is ErrInvalid
//     and whose Field names the input at fault (ids `[a-z0-9][a-z0-9._-]{0,62}`, text up to
//     12,000 characters, non-negative quota, cron specs parsed by robfig/cron, IANA zones).
//   - Idempotency, one replay path (Do): an operation given Meta.IdempotencyKey stores its
//     result; the same key with the same request returns that result and writes nothing, even
//     while the first call is in flight (the retry waits on the key's lock, then reads the
//     committed receipt); another request under the key is ErrConflict naming
//     idempotency_key. Keys are scoped by actor and built in keys.go. Agent tokens are never
//     stored in clear, so a replayed registration or rotation returns the agent without its
//     token.
//   - Answers name the input at fault, never a constraint or a driver message.
//   - Concurrency: claims, gate answers, spends and turn opens lock the row they change or
//     rely on a unique index, so concurrent callers see exactly one winner: a claim never
//     overwrites another agent's live claim (transfer is explicit), at most one turn per
//     goal x agent is live, a turn is debited at most once, and a goal has at most one open
//     stall gate. A turn names one todo, and its evidence and spend name the same one: a live
//     turn moves to another todo only while it has recorded nothing (BindTurnTodo).
//   - A permission gate (permission.go) blocks nothing in should-run and is denied when
//     nobody answered by its deadline: a later answer is refused.
//   - Rules the chat's fast path applies in SQL (who may message a goal: loopx_role; which
//     agent a message reaches: loopx_message_agent) are SQL functions every path calls.
//   - Refusals that an operation decides return ErrForbidden when the caller may not do it
//     (a non-owner answering a gate, an agent cancelling a gate it did not ask) and ErrRefused
//     when the state does not allow it (a spend that is not owed, an answer to a closed gate);
//     both leave an audit row with allowed=false and outcome refused; so do conflicts
//     (ErrConflict) and bounds (ErrFull) of people's and agents' operations, each with its
//     outcome.
//   - Errors are of one kind of the table in kinds.go (ErrorKinds: sentinel, API code, HTTP
//     status, CLI exit code), which every surface reads; an error a program must tell apart
//     from others of its kind carries a Reason constant. Operations that change a record keep each field's before and after in the
//     audit detail ("changes"), runner secrets redacted.
//   - Runner secrets (a webhook's secret, the values of an exec agent's env) are never stored
//     in clear: they are sealed (AES-256-GCM, bound to goal, agent and name) with the
//     Keyring in agent_secret, listed by name and change time only, and opened only by
//     RunnerConfig. A secret sealed with a key the Keyring lacks is reported, never guessed.
//   - A database that cannot be reached is told apart from an answer (IsUnavailable).
//   - Behind a pooler in transaction mode (OpenWith), no named statement is prepared, Listen
//     polls and Migrate takes a transaction lock.
//   - Migrate never runs on a database migrated by a later release: a migration applied there
//     that this binary does not know is a *NewerSchemaError, before anything changes. Every
//     migration has a down section; MigrateDown undoes named ones (the way back for an older
//     release), and AfterRestore prepares a database restored from a backup (queued receipts
//     are looked up before they are added again).
//   - Time: operations read the injected clock (Options.Now) once and use it for every
//     timestamp they write, so tests and replicas reason about one instant per operation.
//   - Files are content-addressed (SHA-256, one stored content per distinct file) and capped
//     (Options.MaxFileBytes); their content is written before the recording transaction when
//     kept outside PostgreSQL (StageBlob), and deleted only once no file refers to it.
//   - Goal settings with a machine default (breaker_failures, progress_card, quiet_digests)
//     are NULL in the goal's row until set; readers take the effective value through the
//     Goal methods and Options.GoalDefaults.
//   - Spent quota is summed from the append-only ledger over the rolling window, never kept
//     as a counter.
package store
