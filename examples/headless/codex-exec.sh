#!/bin/sh
# OPT-IN, headless: LoopX's exec runner starts one non-interactive `codex exec --full-auto`
# per heartbeat, with the prompt LoopX rendered for the turn. Nobody watches these turns, and
# --full-auto lets Codex edit files and run commands in the working folder without asking.
# Prefer Codex's own session with the MCP server (examples/hosts/README.md, docs/hosts.md).
#
# To opt in, register the agent with the exec runner and LOOPX_HEADLESS=1 in its env:
#
#   loopx agent register --goal-id G --agent-id codex --runner exec --runner-config '{
#     "argv": ["/bin/sh", "/path/to/examples/headless/codex-exec.sh"], "dir": "/path/to/repo",
#     "timeout": "25m", "stdin": "none", "env": {"LOOPX_HEADLESS": "1"}}'
#
# Codex must be able to run `loopx`: put it on PATH (the runner passes PATH through).
set -eu
if [ "${LOOPX_HEADLESS:-}" != 1 ]; then
	echo "headless Codex turns are opt-in: set \"env\": {\"LOOPX_HEADLESS\": \"1\"} in the runner config (docs/agents.md)" >&2
	exit 2
fi
exec codex exec --full-auto --cd "${LOOPX_WORKDIR:-.}" "$(cat "$LOOPX_PROMPT_FILE")"
