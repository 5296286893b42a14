#!/bin/sh
# LoopX demo agent: one bounded turn, driven entirely through the loopx CLI.
#
# The exec runner starts this script once per turn with the turn packet (JSON) on stdin and
# LOOPX_URL, LOOPX_TOKEN, LOOPX_GOAL_ID, LOOPX_AGENT_ID, LOOPX_TURN_ID, LOOPX_TODO_ID in the
# environment. It answers inbox messages, then works on the selected todo: a todo that
# mentions "ask the owner" is drafted and put to the owner as a gate; once the owner approves,
# the next turn finishes it. Every step is recorded as evidence (naming the acceptance
# criteria it meets), the turn ends with a handoff to the next one, and the slot is spent once.
set -u
LOOPX="${LOOPX_BIN:-loopx}"
G="$LOOPX_GOAL_ID"
A="$LOOPX_AGENT_ID"
T="$LOOPX_TURN_ID"
TODO="${LOOPX_TODO_ID:-}"
packet=$(cat)

say() { echo "[demo-agent] $*"; }
lx() { "$LOOPX" "$@"; }

# 1. People first: answer what waits in the inbox.
if lx inbox drain --help >/dev/null 2>&1; then
	items=$(lx --format json inbox drain --goal-id "$G" --agent-id "$A" 2>/dev/null || true)
	for id in $(printf '%s' "$items" | grep -o '"item_id": *[0-9]*' | grep -o '[0-9]*$'); do
		say "answering inbox item $id"
		lx inbox reply --goal-id "$G" --agent-id "$A" --item "$id" \
			--text "Hi! I am the demo agent. I read your message during turn $T and will take it into account." || true
		lx inbox ack --goal-id "$G" --agent-id "$A" --item "$id" >/dev/null 2>&1 || true
	done
fi

if [ -z "$TODO" ]; then
	say "no todo selected; nothing else to do this turn"
	lx refresh-state --goal-id "$G" --agent-id "$A" --turn-instance-id "$T" --next-action "wait for new todos" >/dev/null || true
	exit 0
fi

text=$(printf '%s' "$packet" | sed -n 's/.*"selected_todo":{"todo_id":[0-9]*,"text":"\([^"]*\)".*/\1/p')
say "working on todo $TODO: $text"
lx todo claim --goal-id "$G" --todo-id "$TODO" --agent-id "$A" >/dev/null || { say "could not claim todo $TODO"; exit 1; }

case "$text" in
*"ask the owner"*)
	approved=$(lx --format json gate list --goal-id "$G" --status approved 2>/dev/null | grep -c "\"todo_id\": *$TODO[,} ]" || true)
	if [ "${approved:-0}" -gt 0 ]; then
		lx evidence add --goal-id "$G" --agent-id "$A" --todo-id "$TODO" --kind note \
			--summary "The owner approved the draft; release notes are final" >/dev/null
		lx todo done --goal-id "$G" --todo-id "$TODO" --agent-id "$A" >/dev/null
		say "the owner approved; todo $TODO is done"
	else
		lx evidence add --goal-id "$G" --agent-id "$A" --todo-id "$TODO" --kind artifact \
			--summary "Drafted the release notes: 3 features, 2 fixes, 1 breaking change" --ref "release-notes.md" >/dev/null
		lx gate ask --goal-id "$G" --agent-id "$A" --todo-id "$TODO" \
			--question "I drafted the release notes (3 features, 2 fixes, 1 breaking change). May I publish them?" \
			--option approve --option reject >/dev/null
		say "asked the owner before publishing; todo $TODO waits for the gate"
	fi
	;;
*)
	lx evidence add --goal-id "$G" --agent-id "$A" --todo-id "$TODO" --kind link --criterion c1 --criterion g1 \
		--summary "Published: $text" --ref "https://example.invalid/release-notes" >/dev/null
	lx todo done --goal-id "$G" --todo-id "$TODO" --agent-id "$A" >/dev/null
	say "todo $TODO is done"
	;;
esac

lx refresh-state --goal-id "$G" --agent-id "$A" --turn-instance-id "$T" --next-action "continue with the next open todo" \
	--done "worked on todo $TODO: $text" >/dev/null || true
lx quota spend-slot --goal-id "$G" --agent-id "$A" --turn-instance-id "$T" --todo-id "$TODO" >/dev/null || say "no slot owed"
say "turn $T finished"
