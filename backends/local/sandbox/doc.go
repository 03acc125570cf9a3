// Package sandbox confines a local workspace's commands with the kernel,
// without a container engine. A Spawner per workspace holds one OS thread
// of the broker (root) confined once: fresh mount and network namespaces
// in which the state directory is hidden, /tmp and /dev/shm are the
// workspace's own and only loopback is up; no_new_privs; Landlock (best
// effort); a seccomp filter. Each of those is a property of a thread
// that its children inherit, so every command the thread forks starts
// inside them, and drops to the workspace's own unprivileged uid/gid
// before it execs (SysProcAttr.Credential). A command costs a fork and an
// exec, as unsandboxed.
//
// Nothing the request sets (its environment, LD_PRELOAD...) is read
// before the uid is dropped: the child runs only the Go runtime's
// fork-to-exec code until its execve.
//
// The cgroup placement cannot use CLONE_INTO_CGROUP (clone3, refused by
// the filter: its flags are out of a filter's reach): the command's own
// bash writes its pid into its cgroup through descriptors the broker
// opened (cgroups.Group.PrepareEntry) before anything else runs, so the
// cgroup kill stays the kill boundary.
package sandbox
