#!/usr/bin/env bash
# Checks what make release promises, on the release it left in DIST (default dist):
#   - each binary this machine can run says the release's version (loopx version);
#   - the same commit built again, in another folder and from an empty Go build cache, gives
#     the same bytes as SHA256SUMS says (for this machine's platform: a fresh cache for all
#     four would compile everything four times);
#   - make release run again, in another folder with the build cache the first one left (each
#     binary linked anew), gives the same SHA256SUMS for every platform.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
DIST=${DIST:-dist}
die() { echo "release-check: $*" >&2; exit 1; }

[[ -f $DIST/SHA256SUMS ]] || die "no release in $DIST: run make release first"
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || die "$DIST does not match its SHA256SUMS"
os=$("$GO" env GOOS) arch=$("$GO" env GOARCH)
binary=$(awk -v p="$os-$arch" '$2 ~ "-" p "$" {print $2; exit}' "$DIST/SHA256SUMS")
[[ -n $binary ]] || die "the release in $DIST has no $os/$arch binary"
version=${binary#loopx-}
version=${version%-"$os-$arch"}
said=$("$DIST/$binary" version)
[[ $said == "loopx $version ("* ]] || die "$binary says \"$said\", not version $version"
echo "release-check: $said" >&2

commit=$("$DIST/$binary" version --format json | sed -n 's/.*"commit":"\([0-9a-f]*\)".*/\1/p')
[[ -n $commit ]] || die "$binary does not say its commit"
again=$(mktemp -d "${TMPDIR:-/tmp}/loopx-release-again.XXXXXX")
trap 'chmod -R u+w "$again" 2>/dev/null; rm -rf "$again"' EXIT
GOCACHE="$again/cache" COMMIT="$commit" DIST="$again/dist" TARGETS="$os/$arch" GO="$GO" scripts/release.sh 2>/dev/null
want=$(grep " $binary\$" "$DIST/SHA256SUMS")
got=$(grep " $binary\$" "$again/dist/SHA256SUMS") || die "the second build made no $binary"
[[ $want == "$got" ]] || die "the same commit built twice gave different bytes: $want / $got"
echo "release-check: $binary built again from an empty cache: the same bytes (${want%% *})" >&2

targets=$(awk '{n = split($2, p, "-"); print p[n - 1] "/" p[n]}' "$DIST/SHA256SUMS" | paste -sd ' ')
COMMIT="$commit" DIST="$again/all" TARGETS="$targets" GO="$GO" scripts/release.sh 2>/dev/null
cmp -s "$DIST/SHA256SUMS" "$again/all/SHA256SUMS" ||
  die "make release twice gave different checksums: $(diff "$DIST/SHA256SUMS" "$again/all/SHA256SUMS" | tr '\n' ' ')"
echo "release-check: make release again for $targets: the same SHA256SUMS" >&2
