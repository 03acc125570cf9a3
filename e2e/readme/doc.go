// Package readme runs the README's shell blocks as a new user would: it
// builds the binaries as `make build` does, starts `./bin/broker serve`
// as the README says (on a free port, with XDG_STATE_HOME pointing at a
// temporary state directory), then runs the CLI block and the curl block
// taken from README.md itself with bash, so the README cannot drift from
// what works.
//
// # Overview
//
// Only what must differ from a person's run is substituted: the port
// (127.0.0.1:8722 becomes the free one, and BROKER_URL says so to the
// CLI) and the copy-out directory /tmp/docs-back (a temporary one). The
// CLI block runs with a pseudo-terminal on stdin, so its `exec -t` line
// gets a real interactive shell, into which the test has typed a command
// and `exit`.
//
// The blocks run on the local backend always, and on docker (`serve
// --docker`, which makes docker the default backend) when an engine and
// the workspace image are there; under CI=true the docker run must
// happen.
//
// Run it with `go test ./e2e/readme/`; `-short` skips it.
package readme
