#!/usr/bin/env bash
# Install the agent hosts' CLIs that tests run for real (Claude Code, Codex, OpenCode) from the npm
# registry into a throw-away folder, and print the folder holding their executables:
#
#   export LOOPX_HOST_CLIS_BIN="$(scripts/host-clis.sh /tmp/loopx-host-clis)"
#
# The folder is $1, else LOOPX_HOST_CLIS_DIR, else a new temporary one. Versions are pinned
# to the ones `loopx hosts install` was checked against; CLAUDE_CODE_VERSION, CODEX_VERSION
# and OPENCODE_VERSION override them. A folder that already holds those versions is reused.
# Progress goes to stderr; stdout is only the folder.
set -euo pipefail

dir="${1:-${LOOPX_HOST_CLIS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/loopx-host-clis.XXXXXX")}}"
claude_version="${CLAUDE_CODE_VERSION:-2.1.332}"
codex_version="${CODEX_VERSION:-0.171.0}"
opencode_version="${OPENCODE_VERSION:-1.18.33}"

if ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "host-clis: installing Debian's npm" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
	else
		echo "host-clis: npm is not installed (Debian: apt-get install npm)" >&2
		exit 1
	fi
fi

installed() { # package version
	local pj="$dir/node_modules/$1/package.json"
	[ -f "$pj" ] && [ "$(node -p "require('$pj').version" 2>/dev/null)" = "$2" ]
}

mkdir -p "$dir"
if installed @anthropic-ai/claude-code "$claude_version" && installed @openai/codex "$codex_version" &&
	installed opencode-ai "$opencode_version"; then
	echo "host-clis: claude-code $claude_version, codex $codex_version and opencode $opencode_version already in $dir" >&2
else
	echo "host-clis: installing claude-code $claude_version, codex $codex_version and opencode $opencode_version into $dir" >&2
	for attempt in 1 2 3; do
		if npm install --prefix "$dir" --no-save --no-audit --no-fund --no-update-notifier --loglevel=error \
			"@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version" "opencode-ai@$opencode_version" >&2; then
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
for bin in claude codex opencode; do
	if [ ! -x "$dir/node_modules/.bin/$bin" ]; then
		echo "host-clis: $bin is missing from $dir/node_modules/.bin after the install" >&2
		exit 1
	fi
done
echo "$dir/node_modules/.bin"
