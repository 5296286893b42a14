#!/usr/bin/env bash
# Builds a LoopX release from a commit (make release):
#   DIST/loopx-VERSION-{linux,darwin}-{amd64,arm64}   static binaries (CGO off, zone data inside)
#   DIST/SHA256SUMS                                   their checksums
#   DIST/CHANGES                                   the changelog section: commits since the previous release
#
# The source is the commit itself (git archive), never the working tree, and every input is
# fixed (paths trimmed, no VCS stamp, the commit's own time as the build date), so the same
# commit built with the same Go release gives the same bytes.
#
#   VERSION=v0.2.0 scripts/release.sh   release v0.2.0 from HEAD and record it in RELEASES
#   scripts/release.sh                  the release HEAD is recorded as, else a snapshot
#                                       (vX.Y.Z+1-0.<commit time>-<commit>), recorded nowhere
# Environment: VERSION, COMMIT (default HEAD), DIST (default dist), GO (default go),
# TARGETS (default "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64").
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
DIST=${DIST:-dist}
TARGETS=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'

die() { echo "release: $*" >&2; exit 1; }

commit=$(git rev-parse --verify -q "${COMMIT:-HEAD}^{commit}") || die "no commit ${COMMIT:-HEAD} in this repository"
date=$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd "$commit")
gover=$("$GO" env GOVERSION)

# RELEASES: "version commit date go", oldest first; '#' starts a comment.
releases() { [[ -f RELEASES ]] && grep -v '^[[:space:]]*\(#\|$\)' RELEASES || true; }
recorded_version=$(releases | awk -v c="$commit" '$2 == c {print $1; exit}')

version=${VERSION:-}
record=false
if [[ -n $version ]]; then
  [[ $version =~ $semver ]] || die "VERSION $version is not a semantic version such as v1.2.3"
  other=$(releases | awk -v v="$version" '$1 == v {print $2; exit}')
  if [[ -n $other && $other != "$commit" ]]; then
    die "$version was released from commit $other already; choose the next version"
  fi
  if [[ -n $recorded_version && $recorded_version != "$version" ]]; then
    die "commit $commit was released as $recorded_version already"
  fi
  if [[ -z $other ]]; then record=true; fi
elif [[ -n $recorded_version ]]; then
  version=$recorded_version
else
  # A snapshot sorts after the last release and before the next: Go's pseudo-version form.
  last=$(releases | tail -n 1 | awk '{print $1}')
  base=${last:-v0.0.0}
  base=${base%%-*}
  IFS=. read -r major minor patch <<<"${base#v}"
  stamp=$(TZ=UTC git show -s --date=format-local:%Y%m%d%H%M%S --format=%cd "$commit")
  version="v$major.$minor.$((patch + 1))-0.$stamp-${commit:0:12}"
fi

# The previous release: the newest recorded one, other than this, that this commit contains.
previous="" previous_commit=""
while read -r v c _; do
  [[ $v == "$version" ]] && continue
  if git merge-base --is-ancestor "$c" "$commit" 2>/dev/null; then previous=$v previous_commit=$c; fi
done < <(releases)

if [[ -n $(git status --porcelain --untracked-files=no) && ${COMMIT:-HEAD} == HEAD ]]; then
  echo "release: the working tree has uncommitted changes; the release is built from commit ${commit:0:12} without them" >&2
fi

src=$(mktemp -d "${TMPDIR:-/tmp}/loopx-release.XXXXXX")
trap 'rm -rf "$src"' EXIT
git archive --format=tar "$commit" | tar -x -C "$src"

mkdir -p "$DIST"
rm -f "$DIST"/loopx-* "$DIST/SHA256SUMS" "$DIST/CHANGES"
out=$(cd "$DIST" && pwd)
ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.date=$date"
for target in $TARGETS; do
  os=${target%/*} arch=${target#*/}
  echo "release: building $version for $os/$arch" >&2
  (cd "$src" && env CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
    "$GO" build -trimpath -buildvcs=false -tags timetzdata -ldflags "$ldflags" \
    -o "$out/loopx-$version-$os-$arch" ./cmd/loopx)
done
(cd "$DIST" && sha256sum loopx-"$version"-* | LC_ALL=C sort -k2 >SHA256SUMS)

{
  echo "## $version (${date%%T*})"
  echo
  echo "Built from commit $commit with $gover (CGO off, zone data inside); checksums in SHA256SUMS."
  echo
  if [[ -n $previous ]]; then
    echo "Changes since $previous (${previous_commit:0:12}):"
    echo
    git log --no-merges --format='%H %s' "$previous_commit..$commit" | awk '{h = substr($1, 1, 12); $1 = ""; sub(/^ /, ""); print "- " $0 " (" h ")"}'
  else
    echo "The first recorded release."
  fi
} >"$DIST/CHANGES"

if $record; then
  [[ -f RELEASES ]] || die "no RELEASES file at the repository root"
  echo "$version $commit $date $gover" >>RELEASES
  echo "release: recorded $version in RELEASES; commit it" >&2
fi
echo "release: $version in $DIST:" >&2
cat "$DIST/SHA256SUMS" >&2
