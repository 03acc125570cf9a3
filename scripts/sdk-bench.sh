#!/usr/bin/env bash
# The SDK bench (issue 39): one broker, one workspace, and in one run the Go
# client (scripts/sdkbench), the Python SDK's sync client
# (integrations/python/bench.py) and, when integrations/typescript/bench
# exists, the TypeScript SDK, interleaved round by round, then a table of
# each figure's median over the rounds, the overhead over Go, and the
# issue's targets (Python sync <= +0.5 ms p50, TypeScript <= +0.3 ms p50,
# RSS growth of a streamed 1 GiB download <= 64 MiB).
#
# Every bench prints {"read4k_p50_ms":..,"true_p50_ms":..,"download_rss_growth_mib":..}
# and reads BROKER_URL, BROKER_TOKEN, WSBROKER_BENCH_WS, WSBROKER_BENCH_READ,
# WSBROKER_BENCH_BIG, WSBROKER_BENCH_N and WSBROKER_BENCH_NO_DOWNLOAD (1:
# skip the download; only the first round downloads).
#
# Knobs: SDK_BENCH_ROUNDS (3), SDK_BENCH_N (calls per figure and round, 300),
# SDK_BENCH_BACKEND (local), PYTHON (/usr/bin/python3), GO (go).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${SDK_BENCH_ROUNDS:-3}
N=${SDK_BENCH_N:-300}
BACKEND=${SDK_BENCH_BACKEND:-local}
PYTHON=${PYTHON:-/usr/bin/python3}
GO=${GO:-go}

tmp=$(mktemp -d /tmp/wsbroker-sdk-bench-XXXXXX)
broker_pid=
cleanup() {
	if [ -n "$broker_pid" ]; then
		kill "$broker_pid" 2>/dev/null || true
		wait "$broker_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

$GO build -o "$tmp/bin/broker" ./cmd/broker
for d in cmd/wsb-*/; do
	[ -d "$d" ] && CGO_ENABLED=0 $GO build -o "$tmp/bin/$(basename "$d")" "./$d"
done
$GO build -o "$tmp/sdkbench" ./scripts/sdkbench

port=$($PYTHON -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# No disk of its own for local workspaces: the bench file is 1 GiB, serve's default disk too.
cat >"$tmp/broker.yaml" <<YAML
listen: 127.0.0.1:$port
stateDir: $tmp/state
defaultBackend: local
local:
  limits:
    diskBytes: -1
YAML
if [ "$BACKEND" = docker ]; then echo 'docker: {}' >>"$tmp/broker.yaml"; fi
"$tmp/bin/broker" serve --config "$tmp/broker.yaml" >"$tmp/broker.log" 2>&1 &
broker_pid=$!
export BROKER_URL=http://127.0.0.1:$port
for _ in $(seq 600); do
	if [ -s "$tmp/state/token" ] && curl -sf "$BROKER_URL/healthz" >/dev/null; then break; fi
	kill -0 "$broker_pid" 2>/dev/null || { cat "$tmp/broker.log"; exit 1; }
	sleep 0.1
done
BROKER_TOKEN=$(cat "$tmp/state/token")
export BROKER_TOKEN
WSBROKER_BENCH_WS=$(curl -sf -H "Authorization: Bearer $BROKER_TOKEN" -H 'Content-Type: application/json' \
	-d "{\"backend\":\"$BACKEND\"}" "$BROKER_URL/v1/workspaces" | $PYTHON -c 'import json,sys; print(json.load(sys.stdin)["id"])')
export WSBROKER_BENCH_WS WSBROKER_BENCH_N=$N
export WSBROKER_BENCH_READ=bench-4k.bin WSBROKER_BENCH_BIG=bench-1g.bin
"$tmp/sdkbench" -prepare

ts_cmd=()
if [ -d integrations/typescript/bench ] && [ ! -f integrations/typescript/dist/src/index.js ]; then
	(cd integrations/typescript && npm ci --ignore-scripts && npm run build) >&2
fi
if [ -d integrations/typescript/bench ]; then
	for f in bench.mjs bench.js index.mjs index.js; do
		if [ -f "integrations/typescript/bench/$f" ]; then ts_cmd=(node "integrations/typescript/bench/$f"); break; fi
	done
	[ ${#ts_cmd[@]} -gt 0 ] || echo "integrations/typescript/bench has no bench.mjs, bench.js, index.mjs or index.js: TypeScript left out" >&2
fi

results=$tmp/results.jsonl
for round in $(seq "$ROUNDS"); do
	nd=1
	[ "$round" = 1 ] && nd=0
	export WSBROKER_BENCH_NO_DOWNLOAD=$nd
	flag=()
	[ "$nd" = 1 ] && flag=(-no-download)
	printf '{"lang":"go","round":%s,"r":%s}\n' "$round" "$("$tmp/sdkbench" -n "$N" "${flag[@]}")" >>"$results"
	pflag=()
	[ "$nd" = 1 ] && pflag=(--no-download)
	printf '{"lang":"python","round":%s,"r":%s}\n' "$round" "$($PYTHON integrations/python/bench.py -n "$N" "${pflag[@]}")" >>"$results"
	if [ ${#ts_cmd[@]} -gt 0 ]; then
		printf '{"lang":"typescript","round":%s,"r":%s}\n' "$round" "$("${ts_cmd[@]}" | tail -n 1)" >>"$results"
	fi
done

$PYTHON - "$results" "$BACKEND" "$ROUNDS" "$N" <<'PY'
import json, statistics, sys
path, backend, rounds, n = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
langs = [l for l in ("go", "python", "typescript") if any(r["lang"] == l for r in rows)]
def med(lang, key):
    v = [r["r"].get(key) for r in rows if r["lang"] == lang and r["r"].get(key) is not None]
    return statistics.median(v) if v else None
target = {"python": 0.5, "typescript": 0.3}
go = {k: med("go", k) for k in ("read4k_p50_ms", "true_p50_ms")}
for r in rows:
    print(f"round {r['round']} {r['lang']:<11} {json.dumps(r['r'])}")
print(f"SDK bench: {backend} backend, {rounds} interleaved rounds of {n} calls per figure (medians of the rounds' p50s)")
print(f"{'client':<12} {'read 4 KiB p50':>15} {'over Go':>9} {'bash true p50':>14} {'over Go':>9} {'1 GiB dl RSS':>13}  targets")
ok = True
for l in langs:
    cells, verdict = [], []
    for k in ("read4k_p50_ms", "true_p50_ms"):
        v = med(l, k)
        d = None if v is None or go[k] is None else v - go[k]
        cells += [f"{v:.3f} ms" if v is not None else "-", "" if l == "go" or d is None else f"{d:+.3f}"]
        if l in target and d is not None and d > target[l]:
            verdict.append(f"{k} over +{target[l]} ms"); ok = False
    g = med(l, "download_rss_growth_mib")
    if g is not None and g > 64:
        verdict.append("RSS over 64 MiB"); ok = False
    tgt = "" if l == "go" else (f"<= +{target[l]} ms, <= 64 MiB: " + ("; ".join(verdict) or "met"))
    print(f"{l:<12} {cells[0]:>15} {cells[1]:>9} {cells[2]:>14} {cells[3]:>9} {(f'{g:.1f} MiB' if g is not None else '-'):>13}  {tgt}")
print("all targets met" if ok else "some targets missed")
PY
