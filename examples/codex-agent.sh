#!/bin/sh
# Drive OpenAI Codex CLI with the exec runner: one non-interactive `codex exec` per turn,
# given the prompt LoopX rendered for the turn (goal, selected todo, inbox, gates and the
# loopx commands to call). Codex calls the loopx CLI itself with the turn's LOOPX_TOKEN.
#
#   loopx agent register --goal-id G --agent-id codex --runner exec \
#     --runner-config '{"argv": ["/bin/sh", "/path/to/examples/codex-agent.sh"], "dir": "/path/to/repo", "timeout": "25m", "stdin": "none"}'
#
# Codex must be able to run `loopx`: put it on PATH (the runner passes PATH through).
set -eu
exec codex exec --full-auto --cd "${LOOPX_WORKDIR:-.}" "$(cat "$LOOPX_PROMPT_FILE")"
