#!/usr/bin/env bash
# `make test` as it runs on a busy 2-core machine: two full test suites at once, each in its
# own fresh clone of the current commit and against its own private PostgreSQL cluster (even
# when 127.0.0.1:5432 answers), beside two CPU-bound busy loops. Fails when either suite
# fails; prints each suite's time and the load average. The loops, the clones and their
# clusters are gone when it returns, however it ends.
# Usage: scripts/test-loaded.sh   (or make test-loaded; MAKE and GO are taken from the environment)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
commit=$(git rev-parse HEAD)
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "test-loaded: uncommitted changes are not tested; the clones are of $commit" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/loopx-loaded.XXXXXX")
pids=()
loops=()
# Each background job gets a process group of its own (job control), so a suite stopped early
# takes its go test and its PostgreSQL cluster's script with it.
set -m
cleanup() {
  local p
  for p in "${loops[@]}" "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${loops[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for i in 1 2; do
  git clone --quiet --no-hardlinks "$root" "$work/clone$i"
  git -C "$work/clone$i" checkout --quiet --detach "$commit"
done

# Two busy loops, one per core, for the whole run.
for i in 1 2; do
  bash -c 'while :; do :; done' &
  loops+=("$!")
done

echo "test-loaded: two suites of $commit beside two busy loops; logs in $work until it ends" >&2
for i in 1 2; do
  (
    cd "$work/clone$i"
    start=$(date +%s)
    rc=0
    # Unset TEST_DATABASE_URL and DATABASE_URL and ask for a private cluster, as on a machine
    # with nothing on 5432.
    env -u TEST_DATABASE_URL -u DATABASE_URL LOOPX_TEST_PRIVATE_PG=1 \
      "${MAKE:-make}" --no-print-directory test >"$work/suite$i.log" 2>&1 || rc=$?
    echo "$rc $(($(date +%s) - start))" >"$work/suite$i.result"
  ) &
  pids+=("$!")
done

# The 1-minute load average while the suites run, sampled every 5 s.
peak=0
while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
  load=$(cut -d' ' -f1 /proc/loadavg)
  peak=$(awk -v a="$load" -v b="$peak" 'BEGIN { print (a > b) ? a : b }')
  sleep 5
done
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()

failed=0
for i in 1 2; do
  read -r rc secs <"$work/suite$i.result" || { rc=1; secs=?; }
  if [[ "$rc" == 0 ]]; then
    echo "test-loaded: suite $i passed in ${secs} s"
  else
    failed=1
    echo "test-loaded: suite $i FAILED (exit $rc) in ${secs} s; its failures:"
    grep -E -A25 '^\s*--- FAIL|^panic:' "$work/suite$i.log" | head -200 || true
    cp "$work/suite$i.log" "${TMPDIR:-/tmp}/loopx-loaded-suite$i.log"
    echo "test-loaded: suite $i's whole log: ${TMPDIR:-/tmp}/loopx-loaded-suite$i.log"
  fi
done
echo "test-loaded: peak 1-minute load average $peak (now: $(cut -d' ' -f1-3 /proc/loadavg))"
exit "$failed"
