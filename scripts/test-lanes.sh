#!/usr/bin/env bash
# Runs the whole test suite in two lanes side by side: the Go packages
# (scripts/go-test.sh) in the foreground, and the integrations (pi under each
# version, the MCP client, the Python and TypeScript SDKs: each against a
# broker of its own, mostly waiting on it) one after another in the
# background, their output kept in $LANE_LOG and printed when the Go lane
# is done, so a CI log reads one suite at a time. The integrations spend
# most of their time waiting on their brokers, so running them beside the
# Go packages saves their whole length from the run (about ten minutes);
# it fails when either lane fails.
set -uo pipefail
make_cmd="${MAKE:-make}"
log="${LANE_LOG:-/tmp/wsbroker-integrations.log}"
targets="${INTEGRATION_TARGETS:-test-pi test-mcp test-python test-ts}"

(
	status=0
	for t in $targets; do
		echo "== make $t"
		start=$(date +%s)
		"$make_cmd" --no-print-directory "$t" || { echo "== make $t FAILED"; status=1; }
		echo "== make $t: $(($(date +%s) - start)) s"
	done
	exit "$status"
) >"$log" 2>&1 &
lane=$!

scripts/go-test.sh "$@"
go_status=$?

wait "$lane"
lane_status=$?
echo
echo "== integrations (output kept in $log)"
cat "$log"
if [ "$lane_status" -ne 0 ]; then
	echo "== integrations FAILED:"
	grep -E '^== make .* FAILED' "$log"
fi
[ "$go_status" -eq 0 ] && [ "$lane_status" -eq 0 ]
