// Package inbox is the agents' async inbox: what people address to an agent from chat waits
// here until the agent takes it.
//
// Guarantees:
//   - Bounds: a message longer than Options.MaxChars (12,000 characters) is refused, and an
//     agent with Options.MaxPending (200) unacknowledged items refuses more with store.ErrFull;
//     nothing is dropped silently, the caller tells the sender.
//   - The same source message for the same agent is one item (a redelivered chat event or a
//     retried enqueue adds nothing).
//   - Drain hands out pending items steer first, then oldest first, and marks them delivered.
//     A queue item sent while a turn of the agent was live is not handed out until that turn
//     ends (or its lease passes): /queue is for the next turn, never the live one.
//     An item not acked within Options.AckTimeout returns to pending (at the next drain, count
//     or Requeue), so an agent that crashes mid-turn loses nothing.
//   - A steer is for one live turn: if that turn ends before the agent takes the item, it
//     expires and its sender is told (in the message's thread) how to queue instead. A steer
//     the turn did take but not ack is redelivered like any item.
//   - Reply answers in the original conversation (same chat, in the thread of the source
//     message) through one outbox row per (item, reply key): the same reply twice is one row;
//     another text under a used key is store.ErrConflict.
//   - Every operation is one transaction with its audit row; on a store joined to a caller's
//     transaction (store.Store.In) it joins that transaction.
//   - Time comes from Options.Now; items carry the timestamps it gives.
package inbox
