// Package docker is the workspace backend for containers of a Docker
// engine: one hardened container per workspace.
//
// # Overview
//
// New(cfg, logger) connects to the engine (the API version is
// negotiated), logs its runc version and starts the idle reaper. Create
// makes a named volume and a container, both labelled
// wsbroker.managed=1, wsbroker.workspace=<id>, wsbroker.created-at and
// wsbroker.root, and
// starts it; List finds them again after a broker restart; Destroy removes
// the container (and so every process in it) and the volume.
//
// A workspace is a remote.Workspace (package remote: files, commands,
// searches, the agent connection and its restarts) over its container.
// With the in-box agent (Config.Agent, on by default when the broker's
// binary is injected), the first call starts the agent in one engine
// exec (package agentsock: fresh TLS keys on its stdin) and it connects
// to a Unix socket the broker listens on, for that start only, in the
// workspace's run directory (RunDir/<hash of the id> on the host,
// bind-mounted read-only at AgentRunDir, so nothing in the workspace can
// fill it or make it unusable); every later call goes over that one
// connection, never through the engine. An agent that cannot be started
// fails the call with ErrUnavailable: a workspace with an agent never
// falls back to the engine paths below, which serve only workspaces
// without one.
//
// Without the agent, files go over SFTP on the stdio of ONE long-lived
// exec per workspace (package execsftp), replaced when it dies: the
// image's OpenSSH sftp-server, or the broker's own binary bind-mounted
// read-only at InjectedSFTPServer. The archive API (CopyToContainer,
// CopyFromContainer) is never used: it runs on the host side and has a
// history of symlink races (CVE-2018-15664, CVE-2019-14271). Each
// command runs in an exec of its own under the process-group wrapper of
// package remoteexec: the engine has no API to kill an exec (moby #9098),
// so a deadline or cancel kills the whole tree through a second exec,
// and when a fork bomb has filled the pids limit the container is lent
// pids for remoteexec's builtin-only killer. The container's OOM kill
// counter, read around each command, sets ExecResult.OOMKilled.
//
// # Defaults and why
//
//   - User 1000:1000, all capabilities dropped, no-new-privileges: a
//     command cannot gain privileges even through a setuid binary.
//   - Read-only root filesystem; only the workspace volume and
//     size-limited tmpfs mounts at /tmp and at the image's HOME are
//     writable, so nothing the agent does outlives the workspace or fills
//     the engine's disk outside its volume, while git, compilers and
//     package managers still find a writable home.
//   - Each workspace volume a filesystem of its own of DefaultDisk where
//     the host can give one (a root broker on the engine's host with loop
//     devices; not with pools): a workspace cannot fill the engine's
//     disk. Where it cannot, the start warns that volumes are unbounded.
//   - Network none: nothing reaches the network or the host's services.
//   - Memory (no swap), CPU and pids limits, from the configuration; a
//     create request may lower them, never raise them. The pids limit
//     stops a fork bomb inside the container.
//   - docker-init as PID 1 reaps orphans, so zombies do not pile up.
//   - The engine's default seccomp profile.
//   - Images are never pulled, and a request may name only the default
//     image unless allowedImages says otherwise.
//   - Restart policy unless-stopped, so an engine restart brings
//     workspaces back; logging driver none (the main process prints
//     nothing, and exec output never goes to the engine's logs).
//
// Each is a configuration field whose zero value is the secure choice.
//
// # CVE-2024-21626
//
// At start the engine's runc version is logged, with a warning when it
// predates 1.1.12 and is not a distribution build known to carry the fix
// (Debian's 1.1.5+ds1-1+deb12u1 does); the engine is never refused for
// it. An exec's working directory under /proc, named or reached through a
// link, is always refused with ErrPermission, and the engine is only ever
// given the workspace root as a working directory: the command changes
// directory itself, inside the container.
//
// # Boundary
//
// The container is the boundary: paths are not confined to the workspace
// root, and a command may read the image's files. Background processes a
// command leaves behind keep running, as in pi, inside the container's
// limits; Destroy or expiry kills them with the container.
//
// # Requirements on the image
//
// A POSIX sh, setsid, grep, sed, sort and /proc (any Linux userland: the
// wrapper's needs), bash for commands, ripgrep for grep, and a
// WorkspaceDir owned by the configured user (the named volume copies the
// image's directory, ownership included). The workspace image of
// images/workspace has all of it.
package docker
