// Command bench is the broker's benchmark harness: it measures the same
// operations side by side, in-process and through the broker's HTTP API,
// in one run, and prints a table and a JSON report.
//
// # Overview
//
// Run it with `make bench` (or `go run ./cmd/bench`). Each [Target] is one way
// to reach a workspace. For the local backend:
//
//   - local/raw: the floor, the same calls with plain os and os/exec on a
//     directory (no confinement, no tools, no broker);
//   - local/in-process: a local workspace and a tools.Toolbox called
//     directly;
//   - local/http: `broker serve` started as a separate process on a free
//     loopback port with a fresh state directory, driven by the Go client
//     in client/.
//   - local/mcp: another such `broker serve`, its tools called through
//     the workspace's MCP endpoint (/v1/workspaces/{id}/mcp) with the
//     official Go SDK's client (streamable HTTP). It offers only the
//     tool.* rows, which take turns with local/http's, so the ratio
//     mcp/http says what MCP costs beside the HTTP tool route (issue 18's
//     target: tool.read and tool.bash-true within 1.5x).
//   - local/http+sandbox (as root only): a `broker serve` with
//     local.sandbox.mode on, for op.exec-true and tool.bash-true, taking
//     turns with local/http: what the sandbox adds to a command (issue
//     16's target: within 1.5x). The other local targets run with the
//     sandbox off, whatever the default, to be that baseline.
//
// The ssh and docker backends are opt-in (-backends local,ssh,docker;
// default local), since they need root and /usr/sbin/sshd, or a Docker
// engine and the wsbroker/workspace:current image:
//
//   - ssh/raw: one x/crypto/ssh connection to a loopback sshd (started
//     as backends/ssh/sshtest does, with the wsbtest account), a new
//     session running `true` per exec and a pkg/sftp read of the 4 KiB
//     file; ssh/in-process and ssh/http: the ssh backend on that sshd,
//     directly and through a `broker serve --ssh-*`.
//   - docker/raw: one Docker API exec (create, attach, inspect) per op,
//     `true` or `cat` of the 4 KiB file, in a workspace's container;
//     docker/in-process: the docker backend, plus op.create-first-command
//     (a new workspace until its first command has completed);
//     docker/http: a `broker serve` with the docker backend, the target
//     issue 4's goals are checked on (create-first-command through the
//     API too). Both also time op.create-warm-first-command, the same
//     from their warm pool.
//   - kubernetes/in-process and kubernetes/http (-backends kubernetes,
//     with WSB_KUBECONFIG): the kubernetes backend on the test cluster,
//     directly and through a `broker serve`, with a warm pool, both
//     create rows included.
//
// Raw baselines offer only the operations they can time; the ssh and
// docker ones also time their exec of `true` under tool.bash-true's name,
// so the bash tool is compared with a baseline measured in its own turns. The issues'
// targets relative to a raw baseline (bash `true` within 1.3x of a raw
// exec; a read 25x faster than a docker exec of cat) compare rows of the
// same run.
//
// op.read-8m reads an 8 MiB file of random bytes; its MB/s is the size
// over its p50.
//
// The scenarios, each run once per target:
//
//   - op.* and tool.*: every operation and every tool, one caller at a
//     time (latency). op.search-2k searches 2,000 files of which 200
//     match and op.readdir-1k lists 1,000 entries (issue 19's figures);
//     their tree is written at their first warm-up call, not with the
//     rest of the fixture, so other scenarios do not pay for it.
//   - load.mixed: many concurrent clients (default 256) issuing a mix of
//     read, write, stat, ls, bash `true` and grep for -duration. Each
//     client is paced at -rate calls per second (default 1: an agent's
//     tool calls are separated by model turns, so one a second is a busy
//     agent), and latency counts from each call's scheduled start, so
//     queueing in an overloaded broker shows. -rate 0 makes the clients
//     call back to back and measures saturation instead.
//   - stream.base64: `head -c 1G /dev/zero | base64` through the bash
//     tool (streaming output, bounded broker memory).
//   - hostile.* (issue 14), on local/http only: one broker process takes
//     -hostile-clients (200) slow uploads (128 KiB each, sent 1 KiB at a
//     time over -hostile-time, 15 s), as many streaming execs
//     (`head -c 512K /dev/zero | base64`, read at a pace that spreads
//     them over -hostile-time), one 16 MiB download read as slowly per
//     ten uploads, and a burst of -hostile-unauth (2000)
//     unauthenticated requests with 60 KiB queries (32 at once from 8
//     loopback addresses), all at once, while a probe process of its own
//     asks /healthz every 10 ms (hostile.healthz; latency counted from
//     when each probe was due) and, on the same schedule, a bare net/http
//     server it runs itself (hostile.healthz-bare: the machine's share on
//     a shared machine). Nothing lost means: every upload is read back
//     byte-identical, every exec exits 0 with every byte of its output,
//     every download brings every byte,
//     every probe answers 200 "ok", and every unauthenticated request is
//     answered 401 (audited) or 429 (rate-limited, nothing written).
//     Targets: broker peak RSS under 256 MiB, /healthz p99 under 50 ms,
//     nothing lost. Run it alone with `-only hostile` (about 45 s).
//
// For every row the report gives p50, p90, p99, throughput, and the peak
// RSS and CPU of the process doing the work (the broker process for HTTP
// and MCP rows; the harness itself for the others). Ratios are printed per
// backend, HTTP/in-process, in-process/raw and MCP/HTTP, and the issues' targets
// are printed as PASS or FAIL (with a note when the run's conditions
// differ from the target's, as in -quick). Targets are never asserted in
// unit tests: machines are noisy, and the load average printed with the
// table says how much of the machine a run had.
//
// Each scenario gets a fresh session of each target, so a broker's peak
// RSS belongs to that scenario alone. The latency rows (op.*, tool.*) run
// on all of a backend's targets at once, taking turns: each row gives
// every target ten turns of -op-time/10, in an order that rotates, after
// a warm-up on each. These machines are shared and their load drifts over
// seconds, so rows measured one target after the other compared a quiet
// minute with a busy one; taking turns gives the raw baseline and the
// broker the same machine, which is what a ratio target needs.
//
// # Flags
//
//	-duration 30s   length of load.mixed
//	-quick          3 s load, 0.2 s per latency row, 64 MiB stream, 3 s hostile load
//	-json file      also write the report as JSON
//	-only regexp    run only the rows whose name matches
//	-targets regexp run only on the targets whose name matches
//	-backends list  local,ssh,docker (default local)
//	-hostile-clients, -hostile-unauth, -hostile-time  the hostile.* load
//
// See -help for the rest (client count, request rate, stream size, a
// prebuilt broker binary, -strict to exit 3 when a target is missed).
//
// # Adding a backend
//
// Append Targets in targets.go: a Setup that returns a [Session] whose
// clients offer the named operations (and, when it offers only a few,
// their names in Rows, so other scenarios do not set it up). Workspace-backed targets build them
// with workspaceClient; a raw baseline fills in only the ops it has, and
// scenarios skip what a target lacks.
package main
