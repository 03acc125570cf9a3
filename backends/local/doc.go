// Package local is the backend whose workspaces are directories on the
// broker's own machine.
//
// # Overview
//
// Each workspace is StateDir/workspaces/<id>. Every file operation is
// confined to it: a path is resolved against the root lexically
// (opsapi.Resolve) and refused with ErrPermission unless it lies inside
// (opsapi.Within); then every symbolic link is followed one component at a
// time, only while it stays inside, and every access goes through an
// *os.Root opened on the directory, which refuses "..", links out of the
// root and /proc magic links even if the tree changes between the check
// and the use. Links whose target is absolute are followed when the
// target is inside the root.
//
// Files are replaced atomically (temporary file, fsync, rename, directory
// fsync), so a crash leaves the old or the new content. Search runs
// ripgrep and Glob walks the tree with package globwalk (fd's semantics).
//
// # Commands
//
// Exec runs `bash -c` in a new process group with a minimal environment and
// two markers (WSBROKER_CALL, WSBROKER_WORKSPACE). Where the broker may
// manage cgroups (Config.Cgroups "auto", as root), each workspace has a
// cgroup with its limits (memory, pids, CPU: Config.Limits, by default
// 2 GiB and 4096 pids, or the workspace's "limits" option, which may ask
// for less, never more) and each command a child cgroup it is placed
// in before it runs (package cgroups). A deadline or cancellation sends
// SIGTERM to the process group and the command's cgroup, waits KillGrace,
// then kills everything left in the cgroup, so setsid, double fork and a
// cleared environment do not escape; an OOM kill inside the cgroup sets
// ExecResult.OOMKilled and MemoryLimit. A command that exits normally may
// leave background processes (as in pi): they stay in its cgroup, are listed
// and killed by Processes and KillProcesses, and die with Destroy. When the
// backend starts it kills whatever a previous broker's commands left.
// ExecRequest.Stdin reaches the command through a pipe; each signal on
// ExecRequest.Signals goes to the command's cgroup, or without one to its
// group, its marked processes and the running shell's descendants.
//
// Without cgroups (not root, no cgroup file system, Config.Cgroups "off")
// the backend says so once at start and falls back to the process group and
// the markers: a process that leaves its group and clears its environment
// then escapes the kill, and no limits apply (the defaults are dropped,
// logged at start; set limits are refused).
//
// Commands are not sandboxed: they run with the broker's user and can
// reach whatever it can. The local backend confines the file operations
// (so a policy that denies bash also denies the host), not the shell; use
// the docker or ssh backend when the agent itself must be contained.
//
// # Disk
//
// With Config.Limits.DiskBytes, or else Config.DefaultDiskBytes where the
// host can hold it (broker serve sets RecommendedDiskBytes, 1 GiB), each
// workspace is a filesystem of its own (package loopfs: an ext4 image on
// a loop device in StateDir/disks), its sandboxed /tmp beside its root:
// writing past the size is ENOSPC. Otherwise workspaces share the state
// directory's filesystem, logged at start. Close unmounts the filesystems
// and frees their loop devices; a later New finds each workspace and
// mounts it again.
//
// # Platforms
//
// Linux: the backend relies on /proc (descriptors as working directories,
// process markers) and faccessat.
//
// # Example
//
//	b, err := local.New(local.Config{StateDir: "/var/lib/wsbroker"}, logger)
//	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: id})
//	res, err := ws.(opsapi.BashOperations).Exec(ctx, opsapi.ExecRequest{Command: "make", Timeout: time.Minute})
package local
