#!/bin/sh
# OPT-IN, headless: LoopX's exec runner starts one `claude -p` per heartbeat with the prompt
# LoopX rendered for the turn. Only the loopx CLI and read/edit tools are allowed, so the agent
# reports through LoopX and cannot wander; still, nobody watches these turns. Prefer Claude
# Code's own loop with the MCP server (`/loop /loopx`, examples/hosts/README.md).
#
# To opt in, register the agent with the exec runner and LOOPX_HEADLESS=1 in its env:
#
#   loopx agent register --goal-id G --agent-id claude --runner exec --runner-config '{
#     "argv": ["/bin/sh", "/path/to/examples/headless/claude-print.sh"], "dir": "/path/to/repo",
#     "timeout": "25m", "stdin": "none", "env": {"LOOPX_HEADLESS": "1"}}'
set -eu
if [ "${LOOPX_HEADLESS:-}" != 1 ]; then
	echo "headless Claude Code turns are opt-in: set \"env\": {\"LOOPX_HEADLESS\": \"1\"} in the runner config (docs/agents.md)" >&2
	exit 2
fi
exec claude -p "$(cat "$LOOPX_PROMPT_FILE")" \
	--allowedTools "Bash(loopx:*)" "Read" "Edit" "Write" "Bash(git:*)" "Bash(make:*)" \
	--output-format text
