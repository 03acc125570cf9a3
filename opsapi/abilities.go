package opsapi

import (
	"context"
	"encoding/json"
	"io/fs"
	"time"
)

// The optional abilities of a Workspace or a Backend. A caller finds one
// with As, never with a bare type assertion, so that a wrapper (the
// policy Guard) neither hides an ability its workspace has nor claims one
// it lacks.

// Unwrapper is implemented by a Workspace that wraps another, such as the
// policy Guard. As looks through it.
type Unwrapper interface {
	// Unwrap returns the wrapped workspace.
	Unwrap() Workspace
}

// As returns ws as T when ws has the ability. A wrapper counts only when
// everything it wraps has T too (a wrapper implements every interface it
// might forward); an ability the wrapper does not implement is looked for
// in what it wraps, which then serves it unfiltered. That suits the
// abilities a wrapper passes through anyway (Destroyer, ProcessManager,
// CreationTimer, DiskMeasurer, ConfinementReporter).
func As[T any](ws Workspace) (T, bool) {
	var zero T
	for ws != nil {
		t, has := ws.(T)
		u, wraps := ws.(Unwrapper)
		if !wraps {
			return t, has
		}
		if has {
			if _, inner := As[T](u.Unwrap()); inner {
				return t, true
			}
			return zero, false
		}
		ws = u.Unwrap()
	}
	return zero, false
}

// Destroyer is an optional ability of a workspace: remove the sandbox, its
// data and every process still running in it. Destroying twice is not an
// error; an engine or host that cannot be reached is ErrUnavailable.
type Destroyer interface {
	Destroy(ctx context.Context) error
}

// ProcessManager is an optional ability of a Workspace: list and kill the
// processes its commands started and left running. Deleting the workspace
// kills them too; this is for doing it earlier.
type ProcessManager interface {
	// Processes lists every live process that belongs to the workspace,
	// including those of commands still running. A sandbox that cannot be
	// reached is ErrUnavailable.
	Processes(ctx context.Context) ([]Process, error)
	// KillProcesses ends the given processes (SIGTERM, a grace, SIGKILL),
	// or every process of the workspace when pids is empty, and returns
	// how many it killed. A pid that does not belong to the workspace is
	// ErrNotExist and nothing is killed.
	KillProcesses(ctx context.Context, pids []int) (int, error)
}

// TreeOperations is an optional ability of a Workspace: what moving whole
// directory trees in and out (tar archives) needs beyond reading and writing
// files: symbolic links and permission bits.
type TreeOperations interface {
	// Symlink makes path a symbolic link to target, stored as given (it is
	// not resolved or checked here). An existing path is ErrExist; a missing
	// parent ErrNotExist.
	Symlink(ctx context.Context, target, path string) error
	// Readlink is the target of the symbolic link at path (path's last
	// element is not followed): ErrInvalid when path is not a link,
	// ErrNotExist when missing.
	Readlink(ctx context.Context, path string) (string, error)
	// Chmod sets the permission bits (mode & 0o777) of path, following a
	// link. Missing is ErrNotExist.
	Chmod(ctx context.Context, path string, mode fs.FileMode) error
}

// CreationTimer is an optional ability of a Workspace: when it was made,
// so that a workspace rediscovered after a restart keeps its creation
// time. It cannot fail.
type CreationTimer interface {
	CreatedAt() time.Time
}

// DiskMeasurer is an optional ability of a Workspace whose files the
// broker can measure (the local backend's host directory), for a tenant's
// disk quota. A workspace without it is not counted.
type DiskMeasurer interface {
	// DiskUsage returns the bytes its regular files hold. Files that
	// vanish or cannot be read while it walks are skipped, not errors;
	// ctx ending is ErrCanceled or ErrTimeout.
	DiskUsage(ctx context.Context) (int64, error)
}

// DiskLimiter is an optional ability of a Workspace whose files can live
// on a filesystem of their own, of a fixed size: writing past it is ENOSPC
// inside the workspace, whoever writes, and deleting always works.
type DiskLimiter interface {
	// Disk is the filesystem's use and size. LimitBytes 0 says this
	// workspace has no such filesystem (UsedBytes is then 0 too).
	Disk() (Disk, error)
}

// Disk is a workspace's own filesystem as the kernel sees it.
type Disk struct {
	// UsedBytes counts files and the filesystem's own structures.
	UsedBytes  int64
	LimitBytes int64
}

// DiskSizer is an optional ability of a Backend whose workspaces can have
// filesystems of their own (DiskLimiter): the size a Create with these
// options would give, 0 for none, so that a tenant's disk quota is
// checked before anything is made. Options Create would refuse size 0.
type DiskSizer interface {
	DiskLimit(options json.RawMessage) int64
}

// HidingLister is an optional ability of a Workspace whose listings a
// policy filters: ReadDir, plus how many entries it hid, so that a tool
// can say that the listing is not the whole directory. It is the
// filtering wrapper's own ability: ask the wrapper itself, not As (no
// backend below it has it).
type HidingLister interface {
	ReadDirHiding(ctx context.Context, path string) (entries []FileInfo, hidden int, err error)
}

// Rediscoverer is an optional ability of a Backend: after a broker restart
// it finds the workspaces that still exist, keyed by ID, so that none is
// lost or leaked. An engine or host that cannot be reached is
// ErrUnavailable.
type Rediscoverer interface {
	List(ctx context.Context) (map[string]Workspace, error)
}

// OwnerReporter is an optional ability of a Workspace: the owner its
// engine holds with it (WorkspaceSpec.Owner at create), "" when none was
// recorded.
type OwnerReporter interface {
	Owner() string
}

// GoneReporter is an optional ability of a Workspace: whether its sandbox
// vanished behind the broker's back (a container removed with the engine's
// own tools, a directory or host gone). Gone says why, "" while it is
// there. Such a workspace can only be deleted.
type GoneReporter interface {
	Gone() string
}

// Pinger is an optional ability of a Backend: whether what it depends on
// (a container engine, a remote host) answers now, for the broker's
// readiness. A backend without it is always ready.
type Pinger interface {
	// Ping returns nil when the backend can serve, ErrUnavailable
	// (wrapping the cause) when it cannot, ErrTimeout or ErrCanceled when
	// ctx ends first.
	Ping(ctx context.Context) error
}

// NetworkChooser is an optional ability of a Backend whose workspaces each
// get a network chosen at creation (docker). A backend without it runs
// commands on its host's network, which admission calls "host".
type NetworkChooser interface {
	// Network returns the network mode that a create's options name, or ""
	// when they name none (the backend's default then applies). Options
	// that do not parse name none: Create reports them as ErrInvalid.
	Network(options json.RawMessage) string
	// WithNetwork returns options with the network mode set to network,
	// every other field kept. Options that are not a JSON object are
	// ErrInvalid.
	WithNetwork(options json.RawMessage, network string) (json.RawMessage, error)
}

// TransportReporter is an optional ability of a Workspace: whether its
// commands and files go through the in-box agent or, where the agent
// cannot run, through the backend's fallback, and why
// (GET /v1/workspaces/{id}).
type TransportReporter interface {
	Transport() Transport
}

// Transport is how a workspace's calls reach it.
type Transport struct {
	// Agent: through the in-box agent (its own connection, a subreaper
	// per command); false: through the fallback (the engine's exec, one
	// SSH session per command).
	Agent bool
	// Detail says why the fallback is in use, or that the agent starts
	// at the first call.
	Detail string
}

// ConfinementReporter is an optional ability of a Workspace: what confines
// its commands on this host, layer by layer, so a reviewer sees exactly
// what holds (GET /v1/workspaces/{id}). A backend without it reports
// nothing.
type ConfinementReporter interface {
	Confinement() Confinement
}

// Confinement is the effective confinement of a workspace's commands.
// Each field says whether a layer holds; the zero value is a command run
// as the broker's user with nothing in its way.
type Confinement struct {
	// Sandboxed: commands start through the backend's sandbox at all.
	Sandboxed bool
	// User: they run as an unprivileged uid/gid of the workspace's own
	// (UID), never as root or the broker's user.
	User bool
	UID  int
	// NoNewPrivs: setuid binaries and file capabilities grant nothing.
	NoNewPrivs bool
	// PrivateTmp: /tmp and /dev/shm are the workspace's own and the
	// broker's state directory is hidden (a mount namespace).
	PrivateTmp bool
	// Network is "none" (a network namespace of its own, loopback only)
	// or "host".
	Network string
	// LandlockABI is the Landlock ABI bounding what commands may read and
	// write, 0 for none.
	LandlockABI int
	// Seccomp: a filter denies the system calls that open the kernel's
	// attack surface (mount, unshare, ptrace, bpf, ...).
	Seccomp bool
	// PIDNamespace: commands see only their own processes.
	PIDNamespace bool
	// Cgroup: the workspace's processes are held, limited and killed as
	// one cgroup.
	Cgroup bool
}

// PoolReporter is an optional ability of a Backend: its warm pools of
// workspaces made ahead, for the broker's metrics.
type PoolReporter interface {
	Pools() []PoolStatus
}

// PoolStatus is one warm pool: how many members it keeps and how many
// are ready to be taken now.
type PoolStatus struct {
	Name  string
	Size  int
	Ready int
}

// Finder is an optional ability of a Backend whose engine is shared by
// broker replicas: Find returns workspace id when the engine holds it
// for this broker's identity though this broker did not make or list it
// (another replica made it since), ErrNotExist when the engine does not.
type Finder interface {
	Find(ctx context.Context, id string) (Workspace, error)
}
