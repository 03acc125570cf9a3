// Command sdkbench is the Go client's side of scripts/sdk-bench.sh: the p50
// of a 4 KiB read and of a bash `true` through package client, and the peak
// RSS growth of streaming a 1 GiB file, printed as one JSON object in the
// shape the Python and TypeScript SDK benches print:
//
//	{"read4k_p50_ms":..,"true_p50_ms":..,"download_rss_growth_mib":..}
//
// Usage:
//
//	go run ./scripts/sdkbench [-prepare] [-n 300] [-no-download]
//
// with BROKER_URL, BROKER_TOKEN and WSBROKER_BENCH_WS naming the broker and
// the workspace, WSBROKER_BENCH_READ (default bench-4k.bin) the 4 KiB file
// and WSBROKER_BENCH_BIG (default bench-1g.bin) the 1 GiB one. -prepare
// writes both files and exits, so the timed runs of every language read the
// same files.
package main
