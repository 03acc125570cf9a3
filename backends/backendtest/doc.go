// Package backendtest is the one conformance suite every backend joins.
//
// # Overview
//
// A backend proves it honours the opsapi contract by running Run from its
// own test file, in a few lines:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Options{New: newWorkspace, Confined: true})
//	}
//
// New returns a fresh, empty workspace per call and registers its cleanup
// (Destroy) with t.Cleanup; Create does both from an opsapi.Backend. Every
// case gets its own workspace, so cases run in parallel where that is
// safe. Package overhttp runs the same suite through the broker's HTTP
// handler and the Go client.
//
// # What it covers
//
// The suite is split in groups, each a subtest of Run:
//
//   - ops/files: Open, Access, WriteFile, Mkdir, Stat, ReadDir, RealPath,
//     every error kind through errors.Is, byte-exact round trips, atomic
//     and concurrent replacement, mode preservation.
//   - ops/search: Search and Glob with ripgrep's and fd's semantics.
//   - ops/exec: exit codes, signals as 128+N, interleaved output, the
//     environment, the working directory, timeouts and cancellation that
//     kill the whole tree, background children that hold the pipe.
//   - ops/stdio: ExecRequest.Stdin (byte-exact, 4 MiB whole, EOF closes
//     the command's stdin, a Stdin that never ends holds nothing up) and
//     Signals (to the shell, to a child that left the group and cleared
//     its environment, SIGKILL), skipped when Options.NoStdin or
//     NoSignals says the transport cannot carry them.
//   - confine: path confinement (.., absolute paths, symbolic links out of
//     the root, /proc magic links, a link swapped in a race), only when
//     Options.Confined; a canary file beside the root must stay untouched.
//   - tools/...: the seven pi tools through tools.Toolbox.Call, asserting
//     pi's exact result and error strings (spec §10 of the tool contract).
//   - heavy: a 100 MB file and a 1 GiB output flood streamed with bounded
//     memory, 1000 zombies. These run one at a time, after the rest, so
//     that heap measurements see only their own case.
//
// # Portability
//
// The suite runs against a local directory, a container and an SSH host.
// Fixtures are therefore made through the workspace's own operations
// (WriteFile, Mkdir, Exec), never with os.* on the test host; the only
// host-side file is the confinement canary, created beside the root and
// only when Options.Confined (the local backend).
//
// # Skips
//
// A group skips only when the workspace lacks the interface it needs
// (found by type assertion), or when a precondition of the case cannot
// hold for the workspace's user (permission bits do not bind root), or
// when Options.NoStdin or NoSignals says the transport cannot carry what
// the case needs. Every skip says why.
package backendtest
