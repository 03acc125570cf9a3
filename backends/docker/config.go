package docker

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/internal/bytesize"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/remote"
)

// Config configures the docker backend. Zero fields take the defaults of
// NewConfig when the backend is built, so Config{} is a complete, secure
// configuration. Every risky ability is a field that is off when zero
// (WritableRootfs, AllowNewPrivileges, CapAdd, SeccompProfile), never one
// that must be remembered to turn on.
type Config struct {
	// Identity names the broker (or the group of replicas that share
	// workspaces) this backend works for. Every container and volume it
	// makes carries it (LabelBroker), and it lists, adopts, starts,
	// expires and removes only what carries it, so brokers sharing an
	// engine never touch each other's workspaces. Required; the broker
	// sets it from its top-level identity setting.
	Identity string `json:"-" yaml:"-"`
	// Host is the engine's address: "unix:///var/run/docker.sock"
	// (default) or "tcp://host:2376". DOCKER_HOST is not read: the broker
	// talks to the engine its configuration names.
	Host string `json:"host" yaml:"host"`
	// Box holds defaultImage, allowedImages, user, memory, cpus, disk and
	// tmpfsSize (see remote.Box). Here images are never pulled: they must
	// be present on the engine. User may also be a name the image knows.
	// Memory counts swap too (no swap). Disk gives each workspace volume a
	// filesystem of its own of that size (an ext4 image on a loop device
	// on the engine's host, package loopfs): writing past it is ENOSPC
	// inside the workspace, whoever writes, and rm always works. A create
	// request may ask for less, or for any size of 8 MiB or more when none
	// is configured. It needs the broker to run as root on the engine's own
	// host (a unix socket engine) with loop devices; where it cannot, a
	// configured size falls back to none, logged at start, and a requested
	// one is refused. Disk zero: DefaultDisk where the host can, else (and
	// always with pools, whose members cannot have one) the volume lives on
	// the engine's disk, unbounded, with a warning at start; -1: unbounded
	// on purpose, also warned. TmpfsSize also bounds, when the root
	// filesystem is read-only and the image sets HOME, a tmpfs at HOME (so
	// git, compilers and package managers can keep their configuration and
	// caches; it starts empty).
	remote.Box `yaml:",inline"`
	// Pids limits the container's processes and threads, zombies
	// included, so a fork bomb stops there. A request may ask for less.
	// Default 4096.
	Pids int64 `json:"pids" yaml:"pids"`
	// DiskDir holds the workspace filesystems' images and mount points on
	// the engine's host. Empty: wsbroker-disks-<hash of the identity> in
	// the system's temporary directory; the broker sets <stateDir>/disks.
	DiskDir string `json:"diskDir" yaml:"diskDir"`
	// Network is the container's network mode. Default "none": no network
	// at all. Any other value ("bridge", a user network) is logged at
	// start.
	Network string `json:"network" yaml:"network"`
	// AllowedNetworks are the network modes a create request may name;
	// Network is always allowed. Default none.
	AllowedNetworks []string `json:"allowedNetworks" yaml:"allowedNetworks"`
	// WritableRootfs mounts the image's root filesystem read-write. Off:
	// only the workspace volume and /tmp are writable.
	WritableRootfs bool `json:"writableRootfs" yaml:"writableRootfs"`
	// AllowNewPrivileges lets setuid binaries and file capabilities raise
	// privileges. Off: no-new-privileges is set.
	AllowNewPrivileges bool `json:"allowNewPrivileges" yaml:"allowNewPrivileges"`
	// CapAdd are capabilities given back after all are dropped
	// ("CHOWN"). Default none.
	CapAdd []string `json:"capAdd" yaml:"capAdd"`
	// SeccompProfile is empty for the engine's default profile, a path to
	// a JSON profile, or "unconfined" (logged loudly).
	SeccompProfile string `json:"seccompProfile" yaml:"seccompProfile"`
	// WorkspaceDir is where the workspace volume is mounted, the root of
	// every workspace. The image should own it by User (the volume copies
	// the image's directory, ownership included). Default "/workspace".
	WorkspaceDir string `json:"workspaceDir" yaml:"workspaceDir"`
	// Command is the container's main process, which only has to live:
	// docker-init runs it as its child and reaps every orphan. Default
	// ["sleep", "infinity"].
	Command []string `json:"command" yaml:"command"`
	// IdleTTL removes a workspace (container and volume) that no call has
	// used for this long; a running command counts as use. Zero: never.
	IdleTTL time.Duration `json:"idleTTL" yaml:"idleTTL"`
	// SFTPServer chooses the SFTP server that serves file operations
	// inside the container: "auto" (default: the injected binary when
	// there is one, else the image's, found at one of ImageSFTPServers),
	// "image" (only the image's; nothing is mounted), "inject" (only the
	// broker's own).
	SFTPServer string `json:"sftpServer" yaml:"sftpServer"`
	// AgentBinary is the broker's static in-box agent (cmd/wsb-agent,
	// which is also its SFTP server) on the engine's host, bind-mounted
	// read-only into every new container. Empty: wsb-agent beside the
	// broker's executable, then on PATH; when none is found, "auto" works
	// only for images that ship a server.
	AgentBinary string `json:"agentBinary" yaml:"agentBinary"`
	// SFTPServerBinary is the old name of AgentBinary, still read (with a
	// warning at start) when agentBinary is not set.
	//
	// Deprecated: use AgentBinary.
	SFTPServerBinary string `json:"sftpServerBinary" yaml:"sftpServerBinary"`
	// ImageSFTPServers are where an image's own server is looked for, in
	// order. Default: the Debian, Red Hat and Alpine paths of OpenSSH's.
	ImageSFTPServers []string `json:"imageSFTPServers" yaml:"imageSFTPServers"`
	// Agent chooses how commands and files reach a container: "auto"
	// (default) through the in-box agent (package agent, served by the
	// injected wsb-agent binary) when that binary is injected
	// (sftpServer not "image") and the run directory can be shared with
	// the container, else the engine's exec and the SFTP channel, as with
	// "off". The agent serves both over a connection to a Unix socket the
	// broker listens on in the workspace's run directory, bind-mounted
	// read-only into the container: no byte crosses the engine, and a
	// command costs milliseconds instead of an engine exec.
	Agent string `json:"agent" yaml:"agent"`
	// RunDir holds one directory per workspace for the socket its agent
	// connects to (named by a hash of the workspace's id), bind-mounted
	// read-only into its container. It must stay the same across
	// broker restarts (the mount is fixed when a container is created).
	// Empty: wsbroker-run-<hash of the identity> in the system's
	// temporary directory; the broker sets <stateDir>/run.
	RunDir string `json:"runDir" yaml:"runDir"`
	// SyncWrites fsyncs each written file before it replaces the old one.
	// Off by default: the workspace volume is scratch space that lives and
	// dies with its container, a replace is atomic for every reader
	// either way, and the fsync (a journal commit on the engine's disk,
	// milliseconds when the disk is busy) would be most of a write's
	// cost. Turn it on when a host crash must never leave an empty file.
	SyncWrites bool `json:"syncWrites" yaml:"syncWrites"`
	// Pools keep containers made ahead, each with its agent up, for
	// creates whose options come to the same settings: such a create
	// takes one (a rename and a label, tens of milliseconds) and the pool
	// makes another in the background. Members count against nothing
	// until taken, are removed when the broker stops and reused when it
	// starts again. Default none. Not with disk (each workspace's
	// filesystem is made for it).
	Pools []PoolConfig `json:"pools" yaml:"pools"`
	// Exec holds killGrace, drainIdle, maxDrain, shell and rgPath, all
	// in the container; see package execconf.
	execconf.Exec `yaml:",inline"`
}

// PoolConfig is one warm pool: Size ready containers with the settings a
// create request with these options gets. Empty options are the
// configured defaults; a create matches the pool when its options
// resolve to the same image, limits and network, however it spells them.
type PoolConfig struct {
	// Spec holds name, size (1 to MaxPoolSize ready containers), image,
	// memory and cpus.
	warmpool.Spec `yaml:",inline"`
	// Pids and Network are create options too, checked as a request's
	// are.
	Pids    int64  `json:"pids" yaml:"pids"`
	Network string `json:"network" yaml:"network"`
}

// MaxPoolSize bounds one pool: each member is a running container.
const MaxPoolSize = warmpool.MaxSize

// validIdentity is the form of a broker identity: a label value that
// reads well in `docker ps --filter`.
var validIdentity = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// DefaultDisk is each workspace volume's filesystem when disk is not set
// and the host can give volumes filesystems of their own (the kubernetes
// backend's default too).
const DefaultDisk = ByteSize(1 << 30)

// Defaults.
const (
	DefaultHost         = "unix:///var/run/docker.sock"
	DefaultImage        = remote.DefaultImage // the box defaults are remote.NewBox's
	DefaultPids         = 4096
	DefaultNetwork      = "none"
	DefaultWorkspaceDir = "/workspace"
	DefaultSFTPServer   = SFTPAuto
)

// SFTP server modes.
const (
	SFTPAuto   = "auto"
	SFTPImage  = "image"
	SFTPInject = "inject"
)

// Agent modes.
const (
	AgentAuto = "auto"
	AgentOff  = "off"
)

// SFTPServerName is the broker's agent binary, which is its SFTP server
// too, looked for beside the broker's executable and on PATH.
const SFTPServerName = remote.AgentName

// DefaultCommand is the container's main process.
var DefaultCommand = []string{"sleep", "infinity"}

// DefaultImageSFTPServers are where images keep OpenSSH's sftp-server.
var DefaultImageSFTPServers = []string{
	"/usr/lib/openssh/sftp-server",     // Debian, Ubuntu
	"/usr/libexec/openssh/sftp-server", // Fedora, RHEL
	"/usr/lib/ssh/sftp-server",         // Alpine, Arch
}

// Minimums the engine itself enforces or below which nothing runs.
const (
	minMemory = 6 << 20
	minPids   = 8
)

// NewConfig returns a configuration with every default set.
func NewConfig() Config {
	return Config{
		Host:             DefaultHost,
		Box:              remote.NewBox(),
		Pids:             DefaultPids,
		Network:          DefaultNetwork,
		WorkspaceDir:     DefaultWorkspaceDir,
		Command:          append([]string(nil), DefaultCommand...),
		SFTPServer:       DefaultSFTPServer,
		Agent:            AgentAuto,
		ImageSFTPServers: append([]string(nil), DefaultImageSFTPServers...),
		Exec:             execconf.New(),
	}
}

// withDefaults fills the zero fields from NewConfig.
func (c Config) withDefaults() Config {
	d := NewConfig()
	c.Host, c.Box, c.Pids = cmp.Or(c.Host, d.Host), c.Box.WithDefaults(d.Box), cmp.Or(c.Pids, d.Pids)
	c.Network, c.WorkspaceDir = cmp.Or(c.Network, d.Network), cmp.Or(c.WorkspaceDir, d.WorkspaceDir)
	c.SFTPServer, c.Agent, c.AgentBinary = cmp.Or(c.SFTPServer, d.SFTPServer), cmp.Or(c.Agent, d.Agent), cmp.Or(c.AgentBinary, c.SFTPServerBinary)
	if len(c.Command) == 0 {
		c.Command = d.Command
	}
	if c.ImageSFTPServers == nil {
		c.ImageSFTPServers = d.ImageSFTPServers
	}
	c.Exec = c.Exec.WithDefaults()
	return c
}

// Validate reports every problem with c at once. It checks values only;
// New talks to the engine and looks for the SFTP server binary.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !validIdentity.MatchString(c.Identity) {
		add("identity %q: want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", c.Identity)
	}
	if _, err := client.ParseHostURL(c.Host); err != nil {
		add("host %q: %w", c.Host, err)
	}
	errs = append(errs, c.ImageProblems()...)
	if c.User == "" || strings.ContainsAny(c.User, " \t\n") {
		add("user %q is not a user or uid:gid", c.User)
	}
	if c.Memory < minMemory {
		add("memory must be at least 6 MiB, got %d bytes", c.Memory)
	}
	if c.CPUs <= 0 {
		add("cpus must be positive, got %v", c.CPUs)
	}
	if c.Pids < minPids {
		add("pids must be at least %d, got %d", minPids, c.Pids)
	}
	if c.TmpfsSize <= 0 {
		add("tmpfsSize must be positive, got %d", c.TmpfsSize)
	}
	if c.Network == "" {
		add("network is required")
	}
	for _, n := range c.AllowedNetworks {
		if n == "" {
			add("allowedNetworks holds an empty name")
		}
	}
	for _, capName := range c.CapAdd {
		if capName == "" || strings.ContainsAny(capName, " \t\n") {
			add("capAdd: bad capability %q", capName)
		}
	}
	if c.SeccompProfile != "" && c.SeccompProfile != "unconfined" && !path.IsAbs(c.SeccompProfile) {
		add(`seccompProfile %q must be "unconfined" or an absolute path`, c.SeccompProfile)
	}
	if !path.IsAbs(c.WorkspaceDir) || path.Clean(c.WorkspaceDir) == "/" || strings.HasPrefix(path.Clean(c.WorkspaceDir), "/proc") {
		add("workspaceDir %q must be an absolute path other than / and /proc", c.WorkspaceDir)
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		add("command is required")
	}
	if c.IdleTTL < 0 {
		add("idleTTL must not be negative, got %v", c.IdleTTL)
	}
	if !slices.Contains([]string{SFTPAuto, SFTPImage, SFTPInject}, c.SFTPServer) {
		add("sftpServer %q must be %q, %q or %q", c.SFTPServer, SFTPAuto, SFTPImage, SFTPInject)
	}
	if c.Agent != AgentAuto && c.Agent != AgentOff {
		add("agent %q must be %q or %q", c.Agent, AgentAuto, AgentOff)
	}
	for _, f := range [][2]string{{"runDir", c.RunDir}, {"agentBinary", c.AgentBinary}, {"sftpServerBinary", c.SFTPServerBinary}} {
		if f[1] != "" && !path.IsAbs(f[1]) {
			add("%s %q is not an absolute path", f[0], f[1])
		}
	}
	if c.SFTPServerBinary != "" && c.AgentBinary != "" && c.SFTPServerBinary != c.AgentBinary {
		add("sftpServerBinary %q (the deprecated name of agentBinary) differs from agentBinary %q: set only agentBinary",
			c.SFTPServerBinary, c.AgentBinary)
	}
	pools := make([]warmpool.Spec, len(c.Pools))
	for i, p := range c.Pools {
		pools[i] = p.Spec
	}
	errs = append(errs, warmpool.Check(pools, validIdentity.MatchString)...)
	if c.Disk < -1 {
		add("disk %d: want a size, 0 for the default or -1 for none", c.Disk)
	}
	if len(c.Pools) > 0 && c.Disk > 0 {
		add("pools cannot be used with disk: each workspace's filesystem is made for it at create")
	}
	if c.SFTPServer == SFTPImage && len(c.ImageSFTPServers) == 0 {
		add("sftpServer %q needs imageSFTPServers", SFTPImage)
	}
	for _, p := range c.ImageSFTPServers {
		if !path.IsAbs(p) {
			add("imageSFTPServers: %q is not an absolute path", p)
		}
	}
	errs = append(errs, c.Exec.Problems()...)
	return errors.Join(errs...)
}

// ByteSize is a size in bytes that YAML and JSON may give as "2GiB".
type ByteSize = bytesize.Size
