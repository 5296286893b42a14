#!/bin/sh
# A host-driven loop with the poll runner: LoopX starts nothing; this host (a CI job, a
# laptop) asks should-run itself, runs one bounded turn when told to, settles it, and sleeps
# as long as scheduler_hint says. Agent hosts (Claude Code, Codex, Cursor, OpenCode) run the
# same loop themselves through the MCP server instead: docs/hosts.md. The scheduler still
# records a tick per heartbeat fire (read-only), so digests and /status show what the goal is
# doing.
#
#   loopx agent register --goal-id G --agent-id host --runner poll   # prints the agent token
#   LOOPX_URL=http://127.0.0.1:7377 LOOPX_TOKEN=lxa_... sh examples/poll-host.sh G host
#
# WORK is the command that does one turn; it gets LOOPX_GOAL_ID, LOOPX_AGENT_ID,
# LOOPX_TURN_ID and LOOPX_TODO_ID and uses the same per-turn commands as an exec agent.
set -u
G="$1" A="$2"
LOOPX="${LOOPX_BIN:-loopx}"
WORK="${WORK:-sh examples/shell-agent.sh}"

field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p" | head -n 1; }

while :; do
	T="host-$(date +%s)"
	answer=$("$LOOPX" --format json quota should-run --goal-id "$G" --agent-id "$A" --turn-instance-id "$T" --begin-turn)
	decision=$(printf '%s' "$answer" | field decision)
	interval=$(printf '%s' "$answer" | field interval_minutes)
	action=$(printf '%s' "$answer" | sed -n 's/.*"scheduler_hint": *{"action": *"\([^"]*\)".*/\1/p')
	if [ "$decision" = "run" ]; then
		todo=$(printf '%s' "$answer" | sed -n 's/.*"selected_todo": *{"todo_id": *\([0-9]*\).*/\1/p')
		printf '%s' "$answer" | LOOPX_GOAL_ID="$G" LOOPX_AGENT_ID="$A" LOOPX_TURN_ID="$T" LOOPX_TODO_ID="$todo" sh -c "$WORK" ||
			echo "turn $T failed" >&2
	fi
	if [ "$action" = "stop_until_explicit_resume" ]; then
		echo "goal paused; waiting for /resume" >&2
		interval=10
	fi
	sleep $(( ${interval:-3} * 60 ))
done
