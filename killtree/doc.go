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
// cgroups, a cgroup per command closes that gap (see below); this part works
// everywhere, unprivileged.
//
// # Cgroups
//
// OpenCgroups detects the hierarchy (containerd/cgroups: v2 on a unified
// host, v1 on a legacy or hybrid one) and creates a base group; Group and
// Child make a workspace's group and a command's group inside it, with
// memory, pids and CPU limits. Prepare puts a command inside its group before
// it can run anything: on v2 the child is cloned straight into it
// (CLONE_INTO_CGROUP); on v1, which has no such clone, the command is run
// through /bin/sh, which writes its own pid into each hierarchy's
// cgroup.procs with builtins (no fork) and then execs the program; a
// `bash -c` command does the same writes itself, from a BASH_ENV script
// in a pipe that bash runs before the command (one program start less,
// about 1 ms), unless its environment could make bash skip or precede
// that script. Either shell starts without the caller's loader variables
// (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, GCONV_PATH, ...), exported again
// after the writes: a preloaded library could otherwise fork first. No
// descendant can therefore be outside the group: setsid, double fork, env -i
// and nohup change nothing. Group.KillAll sends SIGTERM to the process group
// and to every member (frozen while they are listed), waits the grace, then
// kills the group: cgroup.kill on v2 (Linux 5.14+), freeze + SIGKILL each +
// thaw on v1, repeated until it is empty. Group.OOMKills reads the memory
// controller's oom_kill counter (v2 memory.events, v1 memory.oom_control).
//
// Process identity: KillMarked pins every process it found with a pidfd
// before it checks the marker and signals through that pidfd, so a pid that
// is reused between the scan and the signal is never hit. Group kills rely on
// the kernel keeping a process-group id allocated while any member is alive.
//
// # Platforms
//
// Prepare and KillGroup work on every Unix. GroupMembers, KillMarked and the
// marker half of KillAll need /proc and return errors.ErrUnsupported
// elsewhere; on systems without Unix process groups (Windows) everything but
// Prepare returns errors.ErrUnsupported.
package killtree
