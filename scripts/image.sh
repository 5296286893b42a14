#!/usr/bin/env bash
# The container image of a release, built and run without a daemon or a registry.
#
#   scripts/image.sh build   stage the linux binary make release left in DIST, with the CA
#                            certificates and the passwd entry, and build deploy/Dockerfile's
#                            release target on scratch (podman build --isolation chroot);
#                            prints the image's size
#   scripts/image.sh check   build, then run what was built against PostgreSQL: podman run where
#                            the machine permits it, else the image's filesystem exported and its
#                            entry point started as the image says (its user, its environment;
#                            this needs root: a mount namespace and chroot, as a runtime uses);
#                            a walkthrough through the API and the Lark sandbox, then the
#                            replicas of deploy/replicas behind nginx (bench/chaos -only image)
#
# Environment: DIST (default dist), GO (default go), IMAGE (default loopx), WORK (a folder to
# keep the exported filesystem in; default a temporary one), KEEP_IMAGE=1 (check keeps the
# image it built; by default it removes it).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
DIST=${DIST:-dist}
IMAGE=${IMAGE:-loopx}

die() { echo "image: $*" >&2; exit 1; }
sudo_() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
need() { # command debian-package
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "image: installing Debian's $2" >&2
  sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_ apt-get install -y -qq "$2" >/dev/null
}

arch=$("$GO" env GOARCH)
[[ -f $DIST/SHA256SUMS ]] || die "no release in $DIST: run make release first"
binary=$(awk -v a="linux-$arch" '$2 ~ "^loopx-.*-" a "$" {print $2; exit}' "$DIST/SHA256SUMS")
[[ -n $binary ]] || die "the release in $DIST has no linux/$arch binary"
version=${binary#loopx-}
version=${version%-linux-"$arch"}
tag="$IMAGE:$version"

build() {
  need podman podman
  (cd "$DIST" && sha256sum --quiet -c SHA256SUMS --ignore-missing) || die "$DIST/$binary does not match SHA256SUMS"
  local ca=/etc/ssl/certs/ca-certificates.crt
  [[ -f $ca ]] || need update-ca-certificates ca-certificates
  local ctx="$DIST/image"
  rm -rf "$ctx"
  install -d -m 0755 "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/var/lib"
  install -d -m 0700 "$ctx/home/loopx"
  install -m 0755 "$DIST/$binary" "$ctx/rootfs/usr/local/bin/loopx"
  install -m 0644 "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
  install -m 0644 deploy/image/passwd deploy/image/group "$ctx/rootfs/etc/"
  local commit
  commit=$("$DIST/$binary" version --format json 2>/dev/null | sed -n 's/.*"commit":"\([0-9a-f]*\)".*/\1/p' || true)
  podman build --quiet --isolation chroot -f deploy/Dockerfile --target release \
    --build-arg VERSION="$version" --build-arg COMMIT="${commit:-unknown}" -t "$tag" "$ctx" >/dev/null
  local size
  size=$(podman image inspect --format '{{.Size}}' "$tag")
  echo "image: $tag built, $size bytes ($(awk -v s="$size" 'BEGIN {printf "%.1f MB", s / 1e6}')), user $(podman image inspect --format '{{.Config.User}}' "$tag")"
}

check() {
  build
  local work=${WORK:-}
  if [[ -z $work ]]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/loopx-image.XXXXXX")
    WORK_TMP=$work
    trap 'rm -rf "$WORK_TMP"' EXIT
  fi
  chmod 0755 "$work"
  podman image inspect --format '{{json .Config}}' "$tag" >"$work/config.json"
  local how=()
  if out=$(podman run --rm --network host "$tag" version 2>&1); then
    echo "image: podman run works here: $out" >&2
    how=(-image-podman "$tag")
  else
    echo "image: podman run is refused here (${out##*Error: }); running the image's filesystem instead" >&2
    local c
    c=$(podman create "$tag")
    rm -rf "$work/rootfs" && mkdir -p "$work/rootfs"
    podman export "$c" | tar -x -C "$work/rootfs"
    podman rm "$c" >/dev/null
    how=(-image-rootfs "$work/rootfs")
  fi
  need nginx nginx
  # A check leaves no image behind (CI builds one per commit); make image keeps its own.
  [[ ${KEEP_IMAGE:-} == 1 ]] || trap 'podman image rm -f "$tag" >/dev/null 2>&1 || true; rm -rf "${WORK_TMP:-}"' EXIT
  "$GO" run ./bench/chaos -only image -loopx "$DIST/$binary" "${how[@]}" -image-config "$work/config.json" -image-version "$version" \
    -image-size "$(podman image inspect --format '{{.Size}}' "$tag")" -out bench/results/image.json
}

case ${1:-} in
  build) build ;;
  check) check ;;
  *) die "usage: scripts/image.sh build|check" ;;
esac
