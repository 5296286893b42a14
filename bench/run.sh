#!/usr/bin/env bash
# make bench: the Go benchmarks, then the whole-process should-run benchmark against a real
# `loopx serve`. Needs TEST_DATABASE_URL (scripts/with-postgres.sh sets it) and bin/loopx
# (built here when missing; `make bench` rebuilds it first).
# Results in bench/results/: load.txt, go-bench.json, should-run-process.json, scheduler.json, storage.json,
# bot-ingest-inprocess.txt, bot-ingest.txt (through a real loopx serve),
# bot-ingest-intake-only.txt (the intake with no database work) and workspace.json (the web
# workspace at 10,000 goals: home, the goals list, a busy goal's page and a turn page, beside
# a baseline page measured in the same run) and surfaces.json (the permission gate, files through
# the API and progress cards, each beside a baseline of the same run).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
[ -x bin/loopx ] || go build -o bin/loopx ./cmd/loopx

# The machine's load around each section (1, 5 and 15 minute averages), in load.txt: these
# machines are noisy, and a figure means little without the load it was measured under.
: > bench/results/load.txt
load() { echo "$(date -u +%H:%M:%S) $1: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a bench/results/load.txt >&2; }
trap 'load "end"' EXIT
load "start"

load "before Go benchmarks"
echo "== Go benchmarks (server-side should-run decision at 10,000 goals; the chat fast path's statement per batch size beside a single-row INSERT commit)" >&2
raw=$(mktemp)
trap 'rm -f "$raw"; load "end"' EXIT
go test -run '^$' -bench . -benchtime 2000x -benchmem ./quota/ ./store/ | tee "$raw" >&2
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

load "before should-run process"
echo "== whole-process: loopx quota should-run vs psql select 1 (interleaved)" >&2
go run ./bench/shouldrun -loopx bin/loopx -n "${BENCH_N:-1000}" -out bench/results/should-run-process.json

load "before scheduler"
echo "== scheduler: a real serve at 1k/10k/100k/1M goals, 30-minute heartbeats spread over the interval: tick lateness, database time per tick, RSS" >&2
go run ./bench/scheduler -loopx bin/loopx -sizes "${BENCH_SCHED_SIZES:-1000,10000,100000,1000000}" -out bench/results/scheduler.json

load "before storage"
echo "== storage: 30 simulated days at 10,000 goals with the product's retention sweep: size by table, bytes per goal-day, the plateau" >&2
go run ./bench/storage -goals "${BENCH_STORAGE_GOALS:-10000}" -days "${BENCH_STORAGE_DAYS:-30}" -out bench/results/storage.json

load "before ingest in-process"
echo "== bot: the same ingest into the intake and router in the test process (no outbox sender competing)" >&2
LOOPX_BENCH=1 LOOPX_BENCH_OUT="$PWD/bench/results/bot-ingest-inprocess.txt" go test -count=1 -run '^TestIngestBenchmark$' -timeout 600s ./bot/ >&2
cat bench/results/bot-ingest-inprocess.txt >&2

load "before ingest through serve"
echo "== bot: signed, encrypted HTTP-callback ingest into loopx serve vs pgbench (single-row INSERT commits; the same rows an event commits) at 1/8/32 senders; send latency (replies under load, receipts at light load), receipt backlog after a burst; steady 1,000 events/s for 30 s; serve's peak RSS" >&2
LOOPX_BENCH=1 LOOPX_BENCH_SERVE="$PWD/bin/loopx" LOOPX_BENCH_OUT="$PWD/bench/results/bot-ingest.txt" go test -count=1 -run '^TestIngestBenchmark$' -timeout 600s ./bot/ >&2
cat bench/results/bot-ingest.txt >&2

load "before intake alone"
echo "== bot: the intake alone (verification, decryption, parsing; no database): the ceiling the ingest ratio is measured under" >&2
LOOPX_BENCH=1 LOOPX_BENCH_HANDLER=noop LOOPX_BENCH_OUT="$PWD/bench/results/bot-ingest-intake-only.txt" go test -count=1 -run '^TestIngestBenchmark$' -timeout 600s ./bot/ >&2
cat bench/results/bot-ingest-intake-only.txt >&2

load "before surfaces"
echo "== surfaces: the permission gate (100 concurrent loopx hook permission → card → click → answer, beside one hook alone and Lark's floor), a 10 MB file up and down through the API beside cp, the progress cards of 1,000 live turns within Lark's limits (counted by the sandbox)" >&2
go run ./bench/surfaces -loopx bin/loopx -hooks "${BENCH_HOOKS:-100}" -turns "${BENCH_TURNS:-1000}" -out bench/results/surfaces.json >/dev/null

load "before workspace"
echo "== workspace: server time at 10,000 goals of what needs you, the goals list, a busy goal's page (200 todos, 500 turns) and a turn page, beside a baseline page, for an admin, an owner and a person on no goal" >&2
go run ./bench/workspace -goals "${BENCH_WORKSPACE_GOALS:-10000}" -out bench/results/workspace.json
cat bench/results/workspace.json >&2
