#!/usr/bin/env bash
# deploy/test-local.sh: the replicated deployment of docker-compose.yml, on
# loopback, without Docker. Two ruvllm-serve replicas and HAProxy with
# deploy/haproxy/haproxy.cfg (the compose file's; only the addresses differ,
# given through its environment variables), then three runs of
# `ruvllm-serve loadtest` (SESSIONS chats of TURNS turns at once; a chat's
# first message is FIRST_WORDS words, a document the user pastes, each later
# one USER_WORDS words; each turn sends the whole history):
#   1. affinity:    the config as it is (consistent hashing on the session key);
#   2. round robin: the same config with `balance roundrobin`, the same load;
#   (1 and 2 alternate RUNS times, A B A B, each pair on other chats);
#   3. failover:    affinity again, other chats, and replica 2 killed
#                   (SIGKILL) once a third of the requests have ended.
# The replicas restart before each run, so that no run finds another's cache.
# The last line is
#   affinity_hit=F rr_hit=F ttft_ratio=F failover_errors=N
# hit: the fraction of the history tokens of turns 2.. that came from the
# prefix cache (usage.prompt_tokens_details.cached_tokens over the previous
# turn's prompt and completion tokens, summed over the runs); ttft_ratio: p50
# time to first token of those turns, round robin over affinity (each the
# mean of the runs' p50s); failover_errors: failed or hung requests other
# than those in flight on the killed replica, and any failure of the other
# runs.
# It exits 1 when a hit fraction with affinity is below 0.9 or there is a
# failover error; times are reported, not checked (they depend on the
# machine's load). Needs go, curl and haproxy (2.6 or later).
#
# The replicas are sized for their share of the load, as replicas are when
# one machine no longer holds every chat: PARALLEL (4) sequences at once and
# KV memory for KV_TOKENS (6,000) tokens each, which holds the 4 chats a
# replica gets with affinity at their last turn (~1,380 tokens each with the
# defaults) with 8% to spare, but not all 8 chats, which round robin sends
# to each replica. With more KV memory (KV_TOKENS=0: the default of
# --parallel × --ctx) round robin keeps every chat on both replicas and
# loses only the turns that land on the replica that did not run the
# previous one.
#
# Environment: SESSIONS (8), TURNS (6), FIRST_WORDS (300), USER_WORDS (12),
# MAX_TOKENS (32), THINK (1s: the mean pause before a turn, as loadtest's
# --think; 0 makes a replica's chats run in step), PARALLEL (4), KV_TOKENS
# (6000; 0: the server's default) or KV_MEMORY (a size as --kv-memory
# reads it), RUNS (1), THREADS per replica (1), RUVLLM_TEST_MODEL (a GGUF
# file; default: a llama-134m Q8_0 that `ruvllm-serve synth` writes),
# RUVLLM_TEST_PORT (18180: the balancer; +1, +2 the replicas; +3 HAProxy's
# metrics), KEEP=1 keeps the work directory with the logs and records.
set -euo pipefail
cd "$(dirname "$0")/.."

SESSIONS=${SESSIONS:-8}
TURNS=${TURNS:-6}
USER_WORDS=${USER_WORDS:-12}
FIRST_WORDS=${FIRST_WORDS:-300}
KV_TOKENS=${KV_TOKENS:-6000}
MAX_TOKENS=${MAX_TOKENS:-32}
THREADS=${THREADS:-1}
RUNS=${RUNS:-1}
THINK=${THINK:-1s}
PARALLEL=${PARALLEL:-4}
PORT=${RUVLLM_TEST_PORT:-18180}
LB_PORT=$PORT R1_PORT=$((PORT + 1)) R2_PORT=$((PORT + 2)) LB_METRICS_PORT=$((PORT + 3))

for tool in go curl haproxy; do
	command -v "$tool" >/dev/null || { echo "test-local: $tool is not installed" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ruvllm-test-local.XXXXXX")
declare -A PIDS=()
stop() { # stop NAME: the process started under NAME, and wait for it
	local pid=${PIDS[$1]:-}
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	unset "PIDS[$1]"
}
cleanup() {
	local name
	for name in "${!PIDS[@]}"; do stop "$name"; done
	if [ "${KEEP:-}" = 1 ]; then echo "test-local: logs and records in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

BIN=$WORK/ruvllm-serve
go build -o "$BIN" ./cmd/ruvllm-serve
MODEL=${RUVLLM_TEST_MODEL:-$WORK/llama-134m-q8_0.gguf}
[ -f "$MODEL" ] || "$BIN" synth --shape llama-134m --type Q8_0 --out "$MODEL" >&2

# KV memory of each replica: KV_TOKENS tokens of the model's F16 KV (layers
# × 2 × kv heads × head dim × 2 bytes a token), unless KV_MEMORY says it.
# The replicas run --kv f16 so that it holds that many tokens at any
# length (serve's default, tiered, holds about 3x more at 2,048 tokens).
if [ -z "${KV_MEMORY:-}" ] && [ "$KV_TOKENS" != 0 ]; then
	read -r layers kv_heads head_dim <<<"$("$BIN" inspect --model "$MODEL" | sed -n 's/.* layers \([0-9]*\),.* kv heads \([0-9]*\), head dim \([0-9]*\).*/\1 \2 \3/p')"
	[ -n "${head_dim:-}" ] || { echo "test-local: no layers, kv heads and head dim in inspect's output for $MODEL (set KV_MEMORY)" >&2; exit 2; }
	KV_MEMORY=$((KV_TOKENS * layers * 2 * kv_heads * head_dim * 2))B
fi

for port in "$LB_PORT" "$R1_PORT" "$R2_PORT" "$LB_METRICS_PORT"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "test-local: port $port is taken (set RUVLLM_TEST_PORT)" >&2
		exit 2
	fi
done

# wait_for URL PATTERN WHAT: until the body of URL matches PATTERN (30 s).
wait_for() {
	local i
	for i in $(seq 300); do
		if curl -fsS "$1" 2>/dev/null | grep -q "$2"; then return 0; fi
		sleep 0.1
	done
	echo "test-local: $3 did not come up; logs in $WORK" >&2
	KEEP=1
	exit 1
}

start_replica() { # start_replica N PORT
	"$BIN" serve --model "ruvllm=$MODEL" --chat-template chatml --host 127.0.0.1 --port "$2" \
		--threads "$THREADS" --parallel "$PARALLEL" --ctx 2048 --kv f16 ${KV_MEMORY:+--kv-memory "$KV_MEMORY"} >"$WORK/replica$1.log" 2>&1 &
	PIDS[r$1]=$!
}

# start_all BALANCE: fresh replicas, and HAProxy with the compose file's
# config; BALANCE "affinity" keeps its balance line, "roundrobin" replaces it.
start_all() {
	local cfg=deploy/haproxy/haproxy.cfg
	stop lb
	stop r1
	stop r2
	start_replica 1 "$R1_PORT"
	start_replica 2 "$R2_PORT"
	wait_for "http://127.0.0.1:$R1_PORT/health" ok "replica 1"
	wait_for "http://127.0.0.1:$R2_PORT/health" ok "replica 2"
	if [ "$1" = roundrobin ]; then
		sed 's/^\([[:space:]]*\)balance hash .*/\1balance roundrobin/' "$cfg" >"$WORK/haproxy-rr.cfg"
		grep -q '^[[:space:]]*balance roundrobin$' "$WORK/haproxy-rr.cfg" || { echo "test-local: no balance line in $cfg" >&2; exit 1; }
		cfg=$WORK/haproxy-rr.cfg
	fi
	RUVLLM_LB_BIND=127.0.0.1:$LB_PORT RUVLLM_LB_METRICS=127.0.0.1:$LB_METRICS_PORT \
		RUVLLM_REPLICA_1=127.0.0.1:$R1_PORT RUVLLM_REPLICA_2=127.0.0.1:$R2_PORT \
		haproxy -db -f "$cfg" >"$WORK/haproxy-$1.log" 2>&1 &
	PIDS[lb]=$!
	# Both replicas up in HAProxy's own view (its health checks).
	wait_for "http://127.0.0.1:$LB_METRICS_PORT/metrics" 'haproxy_backend_active_servers{proxy="ruvllm"} 2' "HAProxy with two replicas up"
}

# field LINE KEY: the value of KEY=VALUE in a loadtest summary line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -1; }

loadtest() { # loadtest NAME ARGS...: one run; prints and keeps its summary
	local name=$1
	shift
	"$BIN" loadtest --url "http://127.0.0.1:$LB_PORT" --sessions "$SESSIONS" --turns "$TURNS" \
		--user-words "$USER_WORDS" --first-words "$FIRST_WORDS" --max-tokens "$MAX_TOKENS" --think "$THINK" --key mixed --records "$WORK/$name.jsonl" "$@" >"$WORK/$name.out"
	sed "s/^/$name: /" "$WORK/$name.out"
}

for run in $(seq "$RUNS"); do
	start_all affinity
	loadtest "affinity$run" --seed "$run"
	start_all roundrobin
	loadtest "roundrobin$run" --seed "$run"
done

start_all affinity
total=$((SESSIONS * TURNS))
loadtest failover --seed $((RUNS + 1)) --failover "$WORK/killed" &
lt=$!
until [ -f "$WORK/failover.jsonl" ] && [ "$(wc -l <"$WORK/failover.jsonl")" -ge $((total / 3)) ]; do
	if ! kill -0 "$lt" 2>/dev/null; then echo "test-local: the failover run ended early" >&2; exit 1; fi
	sleep 0.05
done
# The replica dies between these two times.
from=$(date +%s%N)
kill -KILL "${PIDS[r2]}"
wait "${PIDS[r2]}" 2>/dev/null || true
unset "PIDS[r2]"
echo "$from $(date +%s%N) r2" >"$WORK/killed"
wait "$lt"

# pooled KIND: "HIT P50 FAILED" of the runs of KIND: the hit fraction of
# the summed tokens, the mean of the p50s, the failures.
pooled() {
	local cached=0 history=0 p50s="" failed=0 line run
	for run in $(seq "$RUNS"); do
		line=$(head -1 "$WORK/$1$run.out")
		cached=$((cached + $(field "$line" cached)))
		history=$((history + $(field "$line" history)))
		failed=$((failed + $(field "$line" failed)))
		p50s="$p50s $(field "$line" ttft_p50_ms)"
	done
	awk -v c="$cached" -v h="$history" -v p="$p50s" -v f="$failed" \
		'BEGIN { n = split(p, x, " "); s = 0; for (i = 1; i <= n; i++) s += x[i]; printf "%.4f %.1f %d", (h > 0 ? c / h : 0), s / n, f }'
}
read -r affinity_hit aff_p50 aff_failed <<<"$(pooled affinity)"
read -r rr_hit rr_p50 rr_failed <<<"$(pooled roundrobin)"
ttft_ratio=$(awk -v a="$aff_p50" -v r="$rr_p50" 'BEGIN { printf "%.2f", (a > 0 ? r / a : 0) }')
failover_errors=$(field "$(tail -1 "$WORK/failover.out")" failover_errors)
# Failures of the other runs count too: nothing was killed there.
errors=$((failover_errors + aff_failed + rr_failed))
echo "affinity_hit=$affinity_hit rr_hit=$rr_hit ttft_ratio=$ttft_ratio failover_errors=$errors"
awk -v h="$affinity_hit" 'BEGIN { exit !(h >= 0.9) }' || { echo "test-local: affinity hit $affinity_hit < 0.9" >&2; exit 1; }
[ "$errors" -eq 0 ] || { echo "test-local: $errors failed requests" >&2; exit 1; }
