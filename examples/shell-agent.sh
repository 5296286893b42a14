#!/bin/sh
# A plain shell agent for the exec runner: each turn it runs the project's tests for the
# selected todo and records the result. Register it with:
#
#   loopx agent register --goal-id G --agent-id tests --runner exec \
#     --runner-config '{"argv": ["/bin/sh", "/path/to/examples/shell-agent.sh"], "dir": "/path/to/repo", "timeout": "15m"}'
#
# The runner sets LOOPX_URL, LOOPX_TOKEN (valid for this turn only), LOOPX_GOAL_ID,
# LOOPX_AGENT_ID, LOOPX_TURN_ID and LOOPX_TODO_ID, and puts the turn packet on stdin.
set -eu
LOOPX="${LOOPX_BIN:-loopx}"
G="$LOOPX_GOAL_ID" A="$LOOPX_AGENT_ID" T="$LOOPX_TURN_ID" TODO="${LOOPX_TODO_ID:-}"
cat >/dev/null # the packet; this agent only needs the environment

[ -n "$TODO" ] || { echo "no todo selected"; exit 0; }
"$LOOPX" todo claim --goal-id "$G" --todo-id "$TODO" --agent-id "$A"
if out=$(make test 2>&1); then
	"$LOOPX" evidence add --goal-id "$G" --agent-id "$A" --todo-id "$TODO" --kind command \
		--summary "make test passed" --ref "make test"
	"$LOOPX" todo done --goal-id "$G" --todo-id "$TODO" --agent-id "$A"
else
	printf '%s\n' "$out" | tail -n 40
	"$LOOPX" gate ask --goal-id "$G" --agent-id "$A" --todo-id "$TODO" \
		--question "make test fails (see the turn log). Retry, or hand the todo to a person?" \
		--option retry --option hand-over
fi
"$LOOPX" refresh-state --goal-id "$G" --agent-id "$A" --turn-instance-id "$T" --next-action "re-run the tests after changes"
"$LOOPX" quota spend-slot --goal-id "$G" --agent-id "$A" --turn-instance-id "$T" --todo-id "$TODO"
