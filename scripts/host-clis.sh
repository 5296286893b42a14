#!/usr/bin/env bash
# Install the agent hosts' CLIs that tests run for real (Claude Code, Codex, OpenCode, Pi, Gemini
# CLI, Qwen Code, GitHub Copilot CLI), the MCP Inspector and Node 22 (npm's node@22, for the CLIs
# that need it; the folder's node comes first on a PATH that starts with it) from the npm
# registry into a throw-away folder, and print the folder holding their executables:
#
#   export LOOPX_HOST_CLIS_BIN="$(scripts/host-clis.sh /tmp/loopx-host-clis)"
#
# The folder is $1, else LOOPX_HOST_CLIS_DIR, else a new temporary one. Versions are pinned
# to the ones `loopx hosts install` was checked against; CLAUDE_CODE_VERSION, CODEX_VERSION,
# OPENCODE_VERSION, PI_VERSION, GEMINI_VERSION, QWEN_VERSION, COPILOT_VERSION,
# INSPECTOR_VERSION and NODE22_VERSION override them. A folder that already holds those
# versions is reused. Everything is installed by one npm command: a second install into the
# same folder would remove what the first one put there. Progress goes to stderr; stdout is
# only the folder.
set -euo pipefail

dir="${1:-${LOOPX_HOST_CLIS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/loopx-host-clis.XXXXXX")}}"
packages=(
	"@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION:-2.1.332}"
	"@openai/codex@${CODEX_VERSION:-0.171.0}"
	"opencode-ai@${OPENCODE_VERSION:-1.18.33}"
	"@mariozechner/pi-coding-agent@${PI_VERSION:-0.73.1}"
	"@google/gemini-cli@${GEMINI_VERSION:-0.61.0}"
	"@qwen-code/qwen-code@${QWEN_VERSION:-0.24.4}"
	"@github/copilot@${COPILOT_VERSION:-1.0.102}"
	"@modelcontextprotocol/inspector@${INSPECTOR_VERSION:-2.12.0}"
	"node@${NODE22_VERSION:-22.23.3}"
)
bins=(claude codex opencode pi gemini qwen copilot mcp-inspector node)

if ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "host-clis: installing Debian's npm" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
	else
		echo "host-clis: npm is not installed (Debian: apt-get install npm)" >&2
		exit 1
	fi
fi

installed() { # package@version
	local spec="$1" name version pj
	name="${spec%@*}" version="${spec##*@}"
	pj="$dir/node_modules/$name/package.json"
	[ -f "$pj" ] && [ "$(node -p "require('$pj').version" 2>/dev/null)" = "$version" ]
}

mkdir -p "$dir"
all=1
for p in "${packages[@]}"; do
	installed "$p" || all=0
done
if [ "$all" = 1 ]; then
	echo "host-clis: ${packages[*]} already in $dir" >&2
else
	echo "host-clis: installing ${packages[*]} into $dir" >&2
	for attempt in 1 2 3; do
		if npm install --prefix "$dir" --no-save --no-audit --no-fund --no-update-notifier --loglevel=error "${packages[@]}" >&2; then
			break
		fi
		if [ "$attempt" = 3 ]; then
			echo "host-clis: npm install failed 3 times" >&2
			exit 1
		fi
		echo "host-clis: npm install failed; trying again in 5 s" >&2
		sleep 5
	done
fi
for bin in "${bins[@]}"; do
	if [ ! -x "$dir/node_modules/.bin/$bin" ]; then
		echo "host-clis: $bin is missing from $dir/node_modules/.bin after the install" >&2
		exit 1
	fi
done
echo "$dir/node_modules/.bin"
