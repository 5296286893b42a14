#!/bin/sh
# Drive Claude Code with the exec runner: one headless `claude -p` per turn with the prompt
# LoopX rendered for the turn. Only the loopx CLI and read/edit tools are allowed, so the
# agent reports through LoopX and cannot wander.
#
#   loopx agent register --goal-id G --agent-id claude --runner exec \
#     --runner-config '{"argv": ["/bin/sh", "/path/to/examples/claude-code-agent.sh"], "dir": "/path/to/repo", "timeout": "25m", "stdin": "none"}'
set -eu
exec claude -p "$(cat "$LOOPX_PROMPT_FILE")" \
	--allowedTools "Bash(loopx:*)" "Read" "Edit" "Write" "Bash(git:*)" "Bash(make:*)" \
	--output-format text
