#!/usr/bin/env bash
# Runs go test with the given arguments, keeps the whole output in
# $GO_TEST_LOG (default /tmp/wsbroker-go-test.log) and, when a test fails,
# ends with a short summary: every failing test with its own messages, the
# broker's log lines (slog through t.Log) left out. A CI log is often cut in
# the middle; the summary at its end says what failed and why.
set -uo pipefail
log="${GO_TEST_LOG:-/tmp/wsbroker-go-test.log}"
go test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
	echo
	echo "== failures (whole output in $log)"
	grep -v -E '^\s+[A-Za-z0-9_]+\.go:[0-9]+: time=[0-9-]+T[0-9:.]+Z level=' "$log" |
		grep -v -E '^(ok|\?) ' |
		grep -E -A 25 -- '^\s*--- FAIL|^panic:|^FAIL\s' | head -n 400
fi
exit "$status"
