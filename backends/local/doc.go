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
// two markers (WSBROKER_CALL, WSBROKER_WORKSPACE). A deadline or
// cancellation kills the group and every process carrying the call's
// marker (package killtree), which also catches setsid'ed and double-forked
// escapes on Linux. Destroy kills whatever the workspace's commands left
// running, then removes the directory.
//
// Commands are not sandboxed: they run with the broker's user and can
// reach whatever it can. The local backend confines the file operations
// (so a policy that denies bash also denies the host), not the shell; use
// the docker or ssh backend when the agent itself must be contained. A
// process that clears its environment and leaves its process group escapes
// the kill; cgroups will close that gap.
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
