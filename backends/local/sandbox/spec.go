package sandbox

// Network modes.
const (
	NetworkNone = "none" // a fresh namespace with loopback only
	NetworkHost = "host" // the host's network
)

// Spec is how a workspace's commands are confined.
type Spec struct {
	// UID and GID the command runs as; no supplementary groups.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Workspace is the workspace root (canonical); it stays reachable at
	// its path and writable.
	Workspace string `json:"workspace"`
	// Hide are directories replaced by an empty read-only tmpfs (the
	// broker's state directory); the workspace is mounted back inside.
	Hide []string `json:"hide"`
	// Tmp is the host directory mounted on /tmp.
	Tmp string `json:"tmp"`
	// ShmBytes is the size of the fresh tmpfs on /dev/shm; 0 is 64 MiB.
	ShmBytes int64 `json:"shmBytes"`
	// Network is NetworkNone or NetworkHost.
	Network string `json:"network"`
	// ReadPaths are what Landlock lets the command read and execute,
	// besides the workspace, /tmp and /dev/shm; /etc's secrets are left
	// out (see etcDenied). Empty: no Landlock.
	ReadPaths []string `json:"readPaths"`
	// Seccomp installs the filter of seccompPolicy.
	Seccomp bool `json:"seccomp"`
}

// Confinement is what holds for a sandboxed command, as a Spawner
// applied it (one made at start measures it on this host).
type Confinement struct {
	// User: commands run as their workspace's own unprivileged uid/gid.
	User bool `json:"user"`
	// NoNewPrivs: setuid binaries and file capabilities grant nothing.
	NoNewPrivs bool `json:"noNewPrivs"`
	// Mounts: the state directory is hidden, /tmp and /dev/shm are the
	// workspace's own.
	Mounts bool `json:"mounts"`
	// Network is "none" (loopback only) or "host".
	Network string `json:"network"`
	// LandlockABI is the Landlock ABI in force, 0 for none.
	LandlockABI int `json:"landlockABI"`
	// Seccomp: the filter denying kernel-surface calls is installed.
	Seccomp bool `json:"seccomp"`
	// PIDNamespace: the command has its own pid view (never, for now:
	// see docs/security.md).
	PIDNamespace bool `json:"pidNamespace"`
}
