package sandbox

// Arg0 is the launcher's argv[0] (for ps; the cgroup v1 entry shell
// replaces it with the path).
const Arg0 = "wsbroker-sandbox"

// launcherEnv, alone in the launcher's environment with the kill markers,
// is how Main recognises it: argv[0] does not survive every entry.
const launcherEnv = "WSBROKER_SANDBOX_LAUNCHER=1"

// Network modes.
const (
	NetworkNone = "none" // a fresh namespace with loopback only
	NetworkHost = "host" // the host's network
)

// Spec is one confined start: what to run and how to confine it.
type Spec struct {
	// Path, Args and Env are what the command would have run with
	// unconfined (Wrap fills them in).
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// Dir is the working directory's path, inside Workspace.
	Dir string `json:"dir"`
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
	// Network is NetworkNone or NetworkHost.
	Network string `json:"network"`
	// ReadPaths are what Landlock lets the command read and execute,
	// besides the workspace, /tmp and /dev/shm; /etc's secrets are left
	// out (see etcDenied). Empty: no Landlock.
	ReadPaths []string `json:"readPaths"`
	// Seccomp installs the filter of seccompPolicy.
	Seccomp bool `json:"seccomp"`
	// Probe: report what held as JSON on stdout instead of exec'ing.
	Probe bool `json:"probe"`
}

// Confinement is what holds for a sandboxed command, as applied by the
// launcher (a probe at start measures it on this host).
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
	// PIDNamespace: the command has its own pid view (not yet).
	PIDNamespace bool `json:"pidNamespace"`
}
