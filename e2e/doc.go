// Package e2e holds the end-to-end test: it builds the broker binary,
// starts `broker serve` as a user would (a free loopback port, a temporary
// state directory, the token file it writes), and drives it with the CLI
// and with raw HTTP requests, then stops it with SIGTERM.
//
// # Overview
//
// Everything is real: the binary, the local backend, the processes a
// command leaves behind. The test checks what a user would see (output,
// exit statuses, files) and what an operator cares about (the token is
// written 0600 and never logged, the logs are JSON, a deleted workspace
// leaves no process running, SIGTERM ends the broker cleanly and kills
// running commands).
//
// Run it with `go test ./e2e/`; `-short` skips it.
package e2e
