// Package cards renders every card the bot posts to Lark about the state: gate cards (asked,
// answered, cancelled; a host's permission request has its own card, with Allow once, Allow
// for this turn and Deny), proposal cards (preview, receipt, stale), and report digests. Chat,
// the HTTP API, the web workspace, the change kernel and the scheduler all render through the
// one Set that `loopx serve` builds, so a card reads the same whichever surface caused it.
//
// Guarantees:
//   - Renderers that produce outbox rows (GateCards.Ask, GateCards.Update,
//     ProposalCards.Update, ProposalCards.Post) run inside the caller's transaction and read
//     through the executor it passes: rendering never takes a connection of its own, and a
//     card commits with the change it announces.
//   - Each card is written once per chat (or owner) under a dedupe key from store/keys.go, so
//     a retry or a second replica queues nothing twice; updates name the card they replace.
//   - The language is the chat's (/lang), else the goal's, else the process default
//     (ChatLang, GoalLang); every word comes from package templates. What LoopX wrote itself
//     reads in the card's language whatever language it was stored in (GateWords): the stall
//     guard's question, and the labels of the options LoopX gives a gate, whose stored values
//     (what an answer is matched by) never change.
//   - Turn cards (TurnCards) show a turn live (progress notes, elapsed time) and then its
//     outcome, evidence and files; a failure keeps the log's last lines and offers owner-only
//     [Retry now] [Pause agent]; breaker cards offer [Resume agent]. They go to the goal's
//     bound chats (Destinations), the owners by direct message when nothing is bound.
//   - People name gates and proposals by short ids (ShortGate g12, ShortProposal p12); no
//     internal identifier reaches a card.
package cards
