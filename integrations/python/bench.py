"""The Python SDK's bench: p50 of a 4 KiB read and of a bash `true` through
the sync client, and the peak RSS growth of streaming a 1 GiB file, printed
as one JSON object:

    {"read4k_p50_ms": .., "true_p50_ms": .., "download_rss_growth_mib": ..}

    /usr/bin/python3 integrations/python/bench.py --url URL --token TOKEN \\
        --workspace WS [--read PATH] [--big PATH] [-n 300]

Arguments default to $BROKER_URL, $BROKER_TOKEN, $WSBROKER_BENCH_WS,
$WSBROKER_BENCH_READ (a 4 KiB file, default bench-4k.bin) and
$WSBROKER_BENCH_BIG (a 1 GiB file, default bench-1g.bin; made when missing).
scripts/sdk-bench.sh runs it beside the Go and TypeScript clients.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

import wsbroker  # noqa: E402


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def p50_ms(fn, n: int) -> float:
    for _ in range(max(n // 10, 5)):  # warm the connection pool
        fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 3)


def download_growth_mib(ws: wsbroker.Workspace, path: str) -> float:
    base = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    n = 0
    with ws.open(path) as f:
        for chunk in f:
            n += len(chunk)
    if n != 1 << 30:
        raise RuntimeError(f"{path}: read {n} bytes, want 1 GiB")
    return round((_status_kib("VmHWM") - base) / 1024, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("BROKER_URL"))
    ap.add_argument("--token", default=os.environ.get("BROKER_TOKEN"))
    ap.add_argument("--workspace", default=os.environ.get("WSBROKER_BENCH_WS"))
    ap.add_argument("--read", default=os.environ.get("WSBROKER_BENCH_READ", "bench-4k.bin"))
    ap.add_argument("--big", default=os.environ.get("WSBROKER_BENCH_BIG", "bench-1g.bin"))
    ap.add_argument("-n", type=int, default=300, help="calls per figure")
    ap.add_argument("--no-download", action="store_true", help="skip the 1 GiB download")
    a = ap.parse_args()
    if not a.workspace:
        ap.error("--workspace (or $WSBROKER_BENCH_WS) is required")
    with wsbroker.Broker(a.url, a.token) as b:
        ws = b.get(a.workspace)
        if not ws.exists(a.read):
            ws.write_bytes(a.read, os.urandom(4096))
        out = {"read4k_p50_ms": p50_ms(lambda: ws.read_bytes(a.read), a.n),
               "true_p50_ms": p50_ms(lambda: ws.run("true"), a.n),
               "download_rss_growth_mib": None}
        if not a.no_download:
            if not ws.exists(a.big):
                ws.run(f"head -c 1073741824 /dev/zero > '{a.big}'", timeout=600)
            out["download_rss_growth_mib"] = download_growth_mib(ws, a.big)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
