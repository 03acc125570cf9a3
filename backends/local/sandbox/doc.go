// Package sandbox confines a local workspace's commands with the kernel,
// without a container engine: the broker (root) re-executes itself as a
// small launcher that, in fresh mount and network namespaces, hides the
// state directory, gives the workspace its own /tmp and /dev/shm, brings
// up loopback, drops to the workspace's own unprivileged uid/gid, sets
// no_new_privs, applies Landlock (best effort) and a seccomp filter, and
// only then execs the command's shell.
//
// The launcher is the same binary: Wrap rewrites an exec.Cmd so that it
// starts os.Executable with argv[0] "wsbroker-sandbox", and Main (called
// from an init function of package local) takes over such a process
// before the program's own main runs. The command and the confinement
// cross in a sealed memfd on descriptor 3, never in the launcher's
// environment, so nothing the request sets (LD_PRELOAD...) reaches the
// launcher while it is still root.
//
// The launcher keeps the pid it was started with all the way to the
// shell (every step execs), so the cgroup placement done before it runs
// (CLONE_INTO_CGROUP on v2, the entry shell on v1) holds the shell and
// everything it starts: the cgroup kill stays the kill boundary.
package sandbox
