#!/usr/bin/env bash
# make bench: the Go benchmarks, then the whole-process should-run benchmark against a real
# `loopx serve`. Needs TEST_DATABASE_URL (scripts/with-postgres.sh sets it) and bin/loopx
# (built here when missing; `make bench` rebuilds it first).
# Results in bench/results/: go-bench.json, should-run-process.json, scheduler.json,
# bot-ingest-inprocess.txt, bot-ingest.txt (through a real loopx serve),
# bot-ingest-intake-only.txt (the intake with no database work) and workspace.json (the web
# workspace's first pages at 10,000 goals).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
[ -x bin/loopx ] || go build -o bin/loopx ./cmd/loopx

echo "== Go benchmarks (server-side should-run decision at 10,000 goals; the chat fast path's statement per batch size beside a single-row INSERT commit)" >&2
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
go test -run '^$' -bench . -benchtime 2000x -benchmem ./scheduler/quota/ ./store/ | tee "$raw" >&2
# One JSON object per benchmark line: name, iterations and every "value unit" pair.
awk -v at="$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
  BEGIN { printf "{\n  \"at\": \"%s\",\n  \"benchmarks\": [", at; n = 0 }
  /^Benchmark/ {
    printf "%s\n    {\"name\": \"%s\", \"iterations\": %s", (n++ ? "," : ""), $1, $2
    for (i = 3; i + 1 <= NF; i += 2) printf ", \"%s\": %s", $(i+1), $i
    printf "}"
  }
  /^cpu:/ { sub(/^cpu: /, ""); cpu = $0 }
  END { printf "\n  ],\n  \"cpu\": \"%s\"\n}\n", cpu }
' "$raw" > bench/results/go-bench.json
cat bench/results/go-bench.json >&2

echo "== whole-process: loopx quota should-run vs psql select 1 (interleaved)" >&2
go run ./bench/shouldrun -loopx bin/loopx -n "${BENCH_N:-1000}" -out bench/results/should-run-process.json

echo "== scheduler: tick lateness and database time per tick at 1k/10k/100k goals" >&2
go run ./bench/scheduler -sizes "${BENCH_SCHED_SIZES:-1000,10000,100000}" -out bench/results/scheduler.json

echo "== bot: the same ingest into the intake and router in the test process (no outbox sender competing)" >&2
LOOPX_BENCH=1 LOOPX_BENCH_OUT="$PWD/bench/results/bot-ingest-inprocess.txt" go test -count=1 -run '^TestIngestBenchmark$' -timeout 600s ./bot/ >&2
cat bench/results/bot-ingest-inprocess.txt >&2

echo "== bot: signed, encrypted HTTP-callback ingest into loopx serve vs pgbench (single-row INSERT commits; the four rows of an event) at 1/8/32 senders; steady 200 events/s; serve's peak RSS" >&2
LOOPX_BENCH=1 LOOPX_BENCH_SERVE="$PWD/bin/loopx" LOOPX_BENCH_OUT="$PWD/bench/results/bot-ingest.txt" go test -count=1 -run '^TestIngestBenchmark$' -timeout 600s ./bot/ >&2
cat bench/results/bot-ingest.txt >&2

echo "== bot: the intake alone (verification, decryption, parsing; no database): the ceiling the ingest ratio is measured under" >&2
LOOPX_BENCH=1 LOOPX_BENCH_HANDLER=noop LOOPX_BENCH_OUT="$PWD/bench/results/bot-ingest-intake-only.txt" go test -count=1 -run '^TestIngestBenchmark$' -timeout 600s ./bot/ >&2
cat bench/results/bot-ingest-intake-only.txt >&2

echo "== workspace: server time of the first pages (what needs you, a goal page) at 10,000 goals, for an admin, an owner and a person on no goal" >&2
go run ./bench/workspace -goals "${BENCH_WORKSPACE_GOALS:-10000}" -out bench/results/workspace.json
cat bench/results/workspace.json >&2
