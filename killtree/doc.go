// Package killtree ends a command together with everything it started.
//
// # Overview
//
// A shell command is a tree of processes: `bash -c 'make &'` leaves
// grandchildren behind when bash exits, and killing only the shell's pid
// leaks them. Every command is therefore started in its own process group
// (Prepare sets Setpgid), and KillGroup signals the whole group: SIGTERM to
// -pgid, a grace period during which the group is polled, then SIGKILL to
// -pgid. A group or process that is already gone (ESRCH) counts as success.
//
// # Escapes
//
// A process can leave its group: setsid, setpgid, a double fork into a new
// session (daemons, nohup with setsid). On Linux KillMarked finds such
// processes by a marker: the caller puts a random KEY=VALUE pair into the
// command's environment, every descendant inherits it, and KillMarked scans
// /proc/*/environ for that exact entry and kills every process that carries
// it (SIGTERM, grace, SIGKILL, repeated until no marked process is left so
// that one forking while it is being killed does not survive). KillAll does
// both at once under one grace period.
//
// The marker is not a boundary: a process that clears or rewrites its
// environment (env -i, execve with a fresh envp) and also leaves the process
// group escapes both mechanisms. On Linux, where the caller may manage
// cgroups, a cgroup per command closes that gap (package cgroups, which
// builds its kill on this package's group functions); this package works
// everywhere, unprivileged, and imports no cgroup code.
//
// Process identity: KillMarked pins every process it found with a pidfd
// before it checks the marker and signals through that pidfd, so a pid that
// is reused between the scan and the signal is never hit. Group kills rely on
// the kernel keeping a process-group id allocated while any member is alive.
//
// # Platforms
//
// Prepare, KillGroup and SignalGroup work on every Unix. GroupMembers,
// GroupPids, KillMarked and the marker half of KillAll need /proc and
// return errors.ErrUnsupported elsewhere; on systems without Unix process
// groups (Windows) SignalGroup does not exist and everything but Prepare
// returns errors.ErrUnsupported.
package killtree
