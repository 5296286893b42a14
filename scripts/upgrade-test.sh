#!/usr/bin/env bash
# make upgrade-test: the previous release and this tree across one database.
#
# Builds the previous release (the newest line of RELEASES before HEAD) from git history with
# the same Go, and a stand-in for the next release (this tree with one more migration, added
# by go build -overlay), then runs bench/chaos -only upgrade with this tree's bin/loopx:
# upgrade with data in every table, two replicas of the previous release replaced one at a
# time under chat and API load, the downgrade refused with the way back, and the rollback to
# the previous release. Figures in bench/results/upgrade.json.
#
# Environment: GO (default go), PREVIOUS (a version of RELEASES to start from instead).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
die() { echo "upgrade-test: $*" >&2; exit 1; }

[[ -x bin/loopx ]] || die "no bin/loopx: make build first"
head=$(git rev-parse HEAD)
prev_version="" prev_commit=""
while read -r v c _; do
  [[ $c == "$head" ]] && continue
  if [[ -n ${PREVIOUS:-} ]]; then
    [[ $v == "$PREVIOUS" ]] && prev_version=$v prev_commit=$c
  elif git merge-base --is-ancestor "$c" HEAD 2>/dev/null; then
    prev_version=$v prev_commit=$c
  fi
done < <(grep -v '^[[:space:]]*\(#\|$\)' RELEASES)
[[ -n $prev_version ]] || die "RELEASES names no release before HEAD${PREVIOUS:+ called $PREVIOUS}"
git cat-file -e "$prev_commit^{commit}" 2>/dev/null ||
  die "$prev_version's commit $prev_commit is not in this clone (a shallow clone? git fetch --unshallow)"

prev_bin=bin/loopx-$prev_version
if ! [[ -x $prev_bin ]] || ! "$prev_bin" version 2>/dev/null | grep -q "^loopx $prev_version "; then
  echo "upgrade-test: building $prev_version from ${prev_commit:0:12}" >&2
  src=$(mktemp -d "${TMPDIR:-/tmp}/loopx-previous.XXXXXX")
  git archive "$prev_commit" | tar -x -C "$src"
  (cd "$src" && CGO_ENABLED=0 "$GO" build -trimpath \
    -ldflags "-X main.version=$prev_version -X main.commit=$prev_commit" -o "$OLDPWD/$prev_bin" ./cmd/loopx)
  rm -rf "$src"
fi

# The next release stands in: this tree and one more migration, additive like every one.
work=$(mktemp -d "${TMPDIR:-/tmp}/loopx-next.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/99999_next_release.sql" <<'SQL'
-- +goose Up
CREATE TABLE next_release_probe (id bigint PRIMARY KEY, note text NOT NULL DEFAULT '');
ALTER TABLE goal ADD COLUMN next_release_note text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE goal DROP COLUMN next_release_note;
DROP TABLE next_release_probe;
SQL
printf '{"Replace": {"%s": "%s"}}\n' "$PWD/store/migrations/99999_next_release.sql" "$work/99999_next_release.sql" >"$work/overlay.json"
"$GO" build -overlay "$work/overlay.json" -ldflags "-X main.version=next" -o bin/loopx-next ./cmd/loopx

exec "$GO" run ./bench/chaos -only upgrade -loopx bin/loopx -previous "$prev_bin" -previous-version "$prev_version" \
  -previous-commit "$prev_commit" -next bin/loopx-next -out bench/results/upgrade.json
