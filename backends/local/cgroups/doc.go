// Package cgroups puts a command and everything it starts in a Linux
// cgroup, bounds its resources there and kills it as a whole.
//
// # Overview
//
// Package killtree ends a command by its process group and a marker in
// its environment; a process that leaves the group and clears its
// environment escapes both. A cgroup holds every descendant whatever it
// does, so where the caller may manage cgroups, one per command closes
// that gap and adds limits.
//
// Open detects the hierarchy (containerd/cgroups: v2 on a unified host,
// v1 on a legacy or hybrid one) and creates a Base group; Base.Group and
// Group.Child make a workspace's group and a command's group inside it,
// with memory, pids and CPU Limits. Base.Children and Group.Children list
// what a previous run left, so a restarted caller can find and end it.
//
// # Placement before exec
//
// Group.Prepare puts a command inside its group before it can run
// anything: on v2 the child is cloned straight into it (CLONE_INTO_CGROUP);
// on v1, which has no such clone, the command is run through /bin/sh, which
// writes its own pid into each hierarchy's cgroup.procs with builtins (no
// fork) and then execs the program. A `bash -c` command does the same
// writes itself, from a BASH_ENV script in a pipe that bash runs before
// the command (one program start less, about 1 ms), unless its environment
// could make bash skip or precede that script. Either shell starts without
// the caller's loader variables (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH,
// GCONV_PATH, ...), exported again after the writes: a preloaded library
// could otherwise fork first. No descendant can therefore be outside the
// group: setsid, double fork, env -i and nohup change nothing.
//
// Until its entry is done such a shell runs in the caller's own cgroup.
// Prepare's Entry.Wait returns once it is done (the shell closes a pipe
// after its writes), so a caller can start the next command only then
// (procstart.StartThen): a burst of starts then loads one shell at a time
// beside the caller, not hundreds.
//
// # Kill and OOM count
//
// Group.KillAll sends SIGTERM to the command's process group (through
// killtree) and to every member (frozen while they are listed), waits the
// grace, then kills the group: cgroup.kill on v2 (Linux 5.14+), freeze +
// SIGKILL each + thaw on v1, repeated until it is empty. Group.OOMKills
// reads the memory controller's oom_kill counter (v2 memory.events, v1
// memory.oom_control).
//
// # Platforms
//
// Cgroups exist only on Linux. Elsewhere Open returns ErrUnavailable and
// callers run without cgroups (process groups and markers only, no
// limits); Limits and its methods work everywhere, so a configuration
// parses the same on every OS.
package cgroups
