// Package remoteexec runs commands on a remote machine or in a container so
// that a deadline or a cancel can kill the whole process tree, over any
// transport that can start a command and run a short one.
//
// # Overview
//
// Neither SSH nor the Docker engine can reliably kill what a command
// started: the engine has no exec-kill API (moby #9098), and OpenSSH
// honours the "signal" request only from 7.9 and only for the session's
// own process, while closing a session kills nothing. So every command runs
// under a small POSIX sh wrapper:
//
//	sh -c WRAPPER wsbroker CWD SHELL COMMAND HOW LEAD ENV...
//
// The wrapper changes into CWD (reporting a missing one). When the
// transport reports a command's exit as it happens (Config.TransportExit,
// the process an Exiter: an SSH session's exit-status request) and the
// shell running the wrapper already leads a process group of its own
// (sshd starts every session in a new session), the wrapper prints that
// group on a control line and becomes the command: it takes the
// environment, sends stderr into stdout, and evals COMMAND itself when it
// is the bash SHELL names (else it execs SHELL -c COMMAND). Over SSH a
// command then costs what a bare session running it costs: no program
// starts beyond the login shell. The command sees the same environment,
// positional parameters (none) and $$ (its group) as under SHELL -c; only
// the line numbers in bash's error messages differ.
//
// Otherwise (docker: an exec's exit is known only once its output ends,
// and the engine starts it in the container's group) the wrapper starts a
// subshell with its stderr sent into stdout (so the two keep their
// order), which prints its own pid on a control line on stderr, exports
// ENV and execs `setsid SHELL -c COMMAND`: the command's pid is the id of
// its new process group and session. The subshell runs in the
// foreground, not as a background job, which sh would start with SIGINT
// and SIGQUIT ignored for good. The wrapper waits for the command and
// prints its exit status on a second control line. Stdout
// carries the command's output only; stderr only control lines, each
// starting with "@wsbroker ". Three programs start per command (sh,
// setsid, the shell), which is little beside an exec's own cost.
//
// Every command's environment holds a marker, WSBROKER_CALL=<random>, and
// the workspace's own marker. On a deadline or cancel, a second command
// (the RunFunc) runs a kill script: SIGTERM to the group and to every
// process whose /proc/PID/environ holds the call's marker (which catches
// children that called setsid themselves), a grace period, then SIGKILL
// until none is left. The wrapper, outside the group, then reports 143 or
// 137 (or the transport does, when the wrapper was the command). A sweep
// made of bash builtins alone follows every kill: near a process limit
// the kill script's forks fail while a fork bomb refills what it kills;
// the sweep stops what is left round by round, so nothing can fork, and
// kills it.
//
// # Stdin and signals
//
// The command's stdin is empty: Exec refuses a request with Stdin
// (ErrUnavailable, saying it needs the in-box agent).
//
// ExecRequest.Signals is carried as the kill is, by a second command
// through the RunFunc: once the wrapper has reported the command's group,
// each signal received runs a signal script (bounded to 10 s) that sends
// it once to the group and once to every other process of the tree: the
// processes whose environment holds the call's marker, and the
// descendants, by parent pid, of all those (which catches a child that
// both called setsid and cleared its environment, while its parent
// lives). A signal sent before the group is known waits for it; one that
// reaches nothing is dropped. Exec stops receiving when the command's
// output is done, and waits for a signal script still running, so no
// signal is sent after it returns. Each signal costs a round trip and a
// scan of /proc: tens of milliseconds, not the agent's microseconds.
//
// # Exit status
//
// A status above 128 is read as death by signal N = status-128, as a shell
// reports it; ExecResult.Signal names it with Linux's numbering.
//
// # Output
//
// After the command exits, output is drained until it has been quiet for
// DrainIdle (100 ms, re-armed by output), for at most MaxDrain, so a
// background child that holds the pipe neither hangs the call nor loses
// late output. Output passes through one 32 KiB buffer and is written
// serially, never after Exec returns: memory stays bounded whatever the
// command prints.
//
// # Lost transport
//
// When the transport dies mid-command (no exit status ever arrives) Exec
// fails with opsapi.ErrUnavailable. The call's marker is remembered, and
// its processes are killed by Reap, which the next Exec runs first, so no
// orphan of a lost call outlives the reconnect.
//
// # Requirements on the remote side
//
// A POSIX sh, setsid (util-linux or BusyBox), env, grep with -z, sed, sort
// and /proc: any Linux. The remote login shell must accept a POSIX
// command line (sh, bash, dash, zsh, ksh).
package remoteexec
