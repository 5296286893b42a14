#!/usr/bin/env bash
# Install axe-core (the accessibility rules the workspace's browser tests run in Chromium) from
# the npm registry into a throw-away folder, and print the path of its axe.min.js:
#
#   export LOOPX_AXE_JS="$(scripts/axe.sh /tmp/loopx-axe)"
#
# The folder is $1, else LOOPX_AXE_DIR, else a new temporary one. The version is pinned
# (AXE_CORE_VERSION overrides it); a folder that already holds it is reused. Progress goes to
# stderr; stdout is only the path.
set -euo pipefail

dir="${1:-${LOOPX_AXE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/loopx-axe.XXXXXX")}}"
version="${AXE_CORE_VERSION:-4.14.1}"
js="$dir/node_modules/axe-core/axe.min.js"

if ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "axe: installing Debian's npm" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
	else
		echo "axe: npm is not installed (Debian: apt-get install npm)" >&2
		exit 1
	fi
fi
mkdir -p "$dir"
if [ -f "$js" ] && [ "$(node -p "require('$dir/node_modules/axe-core/package.json').version" 2>/dev/null)" = "$version" ]; then
	echo "axe: axe-core $version already in $dir" >&2
else
	echo "axe: installing axe-core $version into $dir" >&2
	for attempt in 1 2 3; do
		if npm install --prefix "$dir" --no-save --no-audit --no-fund --no-update-notifier --loglevel=error "axe-core@$version" >&2; then
			break
		fi
		if [ "$attempt" = 3 ]; then
			echo "axe: npm install failed 3 times" >&2
			exit 1
		fi
		echo "axe: npm install failed; trying again in 5 s" >&2
		sleep 5
	done
fi
[ -f "$js" ] || { echo "axe: $js is missing after the install" >&2; exit 1; }
echo "$js"
