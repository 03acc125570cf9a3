package local

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsbroker/wsbroker/backends/local/cgroups"
	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/loopfs"
)

// Config configures the local backend. Zero fields take the defaults of
// NewConfig when the backend is built, so Config{StateDir: dir} is a
// complete configuration.
type Config struct {
	// StateDir holds the backend's state; each workspace is the directory
	// StateDir/workspaces/<id>. Required, absolute.
	StateDir string `json:"stateDir" yaml:"stateDir"`
	// Exec holds killGrace, drainIdle, maxDrain, shell and rgPath (for
	// Search: a path, or a name looked up on the broker's PATH when a
	// search runs); see package execconf.
	execconf.Exec `yaml:",inline"`
	// Cgroups selects how commands are contained: "auto" (default) uses
	// cgroups where the broker may create them and falls back to process
	// groups and markers where it may not; "v1" or "v2" force a hierarchy
	// (failing to start if it cannot be used); "off" always uses the
	// fallback.
	Cgroups string `json:"cgroups" yaml:"cgroups"`
	// Limits are every workspace's limits; a workspace's options may ask
	// for less, never more (more is ErrInvalid). memoryBytes and pids
	// default to DefaultMemoryBytes (2 GiB) and DefaultPids (4096), as
	// docker's; -1 (Unlimited) turns one off, logged at start. cpu and
	// diskBytes: zero means no limit (diskBytes: DefaultDiskBytes where
	// set). Memory, pids and CPU need cgroups (without them the defaults
	// are dropped, logged at start, and set limits refuse every create);
	// diskBytes needs root and loop devices, and falls back to measuring
	// (logged at start) where the host has neither; -1 turns the default
	// disk off (logged at start).
	Limits Limits `json:"limits" yaml:"limits"`
	// DefaultDiskBytes is the size of each workspace's own filesystem
	// when limits.diskBytes is 0 and this host can give one (root, loop
	// devices); where it cannot, workspaces have none, logged at start as
	// a default that does not hold. broker serve sets
	// RecommendedDiskBytes; zero (a Config built in Go) means no default.
	// Not a configuration key: an operator sets limits.diskBytes.
	DefaultDiskBytes int64 `json:"-" yaml:"-"`
	// CommandLimits bound each command inside its workspace; zero fields
	// mean only the workspace's limits apply.
	CommandLimits cgroups.Limits `json:"commandLimits" yaml:"commandLimits"`
	// Sandbox confines commands with the kernel (see SandboxConfig).
	Sandbox SandboxConfig `json:"sandbox" yaml:"sandbox"`
}

// SandboxConfig says how commands are confined (package sandbox).
type SandboxConfig struct {
	// Mode: "auto" (default) sandboxes commands where the broker can (it runs as
	// root on Linux) and says at start what it cannot; "on" fails to
	// start where it cannot; "off" runs commands as the broker's user,
	// unconfined, logged at start.
	Mode string `json:"mode" yaml:"mode"`
	// UIDBase and UIDCount are the range of uids (and equal gids) given
	// to workspaces, one each: [UIDBase, UIDBase+UIDCount).
	UIDBase  int `json:"uidBase" yaml:"uidBase"`
	UIDCount int `json:"uidCount" yaml:"uidCount"`
	// Network is "none" (default: loopback only) or "host".
	Network string `json:"network" yaml:"network"`
	// ReadPaths are what Landlock lets a command read and execute besides
	// its workspace and /tmp; default sandbox.DefaultReadPaths. /etc
	// stands for its entries less the secrets (shadow, sudoers, ssh,
	// ssl, wsbroker...).
	ReadPaths []string `json:"readPaths" yaml:"readPaths"`
	// Require lists the layers a workspace may not be created without:
	// user, noNewPrivs, privateTmp (also "mounts"), network, landlock,
	// seccomp, pidNamespace, cgroup.
	Require []string `json:"require" yaml:"require"`
}

// Sandbox defaults.
const (
	DefaultSandboxMode     = "auto"
	DefaultSandboxUIDBase  = 1_500_000_000
	DefaultSandboxUIDCount = 65536
	DefaultSandboxNetwork  = "none"
)

// sandboxLayers are the names Require accepts.
var sandboxLayers = []string{"user", "noNewPrivs", "privateTmp", "network", "landlock", "seccomp", "pidNamespace", "cgroup"}

func (c SandboxConfig) withDefaults() SandboxConfig {
	if c.Mode == "" {
		c.Mode = DefaultSandboxMode
	}
	if c.UIDBase == 0 {
		c.UIDBase = DefaultSandboxUIDBase
	}
	if c.UIDCount == 0 {
		c.UIDCount = DefaultSandboxUIDCount
	}
	if c.Network == "" {
		c.Network = DefaultSandboxNetwork
	}
	if c.ReadPaths == nil {
		c.ReadPaths = sandbox.DefaultReadPaths
	}
	return c
}

func (c SandboxConfig) problems() []error {
	var errs []error
	switch c.Mode {
	case "", "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("sandbox.mode must be auto, on or off, got %q", c.Mode))
	}
	switch c.Network {
	case "", "none", "host":
	default:
		errs = append(errs, fmt.Errorf("sandbox.network must be none or host, got %q", c.Network))
	}
	if c.UIDBase < 0 || c.UIDCount < 0 || c.UIDBase+c.UIDCount > 1<<32-2 || (c.UIDBase > 0 && c.UIDBase < 1000) {
		errs = append(errs, fmt.Errorf("sandbox.uidBase %d and uidCount %d must give uids from 1000 below 2^32-2", c.UIDBase, c.UIDCount))
	}
	for _, p := range c.ReadPaths {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("sandbox.readPaths: %q is not absolute", p))
		}
	}
	for _, r := range c.Require {
		if !slices.Contains(sandboxLayers, r) && r != "mounts" {
			errs = append(errs, fmt.Errorf("sandbox.require: unknown layer %q (known: %s)", r, strings.Join(sandboxLayers, ", ")))
		}
	}
	if c.Mode == "off" && slices.ContainsFunc(c.Require, func(r string) bool { return r != "cgroup" }) {
		errs = append(errs, errors.New("sandbox.require needs sandbox.mode auto or on (only cgroup holds without it)"))
	}
	return errs
}

// Defaults.
const (
	DefaultKillGrace = execconf.DefaultKillGrace
	DefaultDrainIdle = execconf.DefaultDrainIdle
	DefaultMaxDrain  = execconf.DefaultMaxDrain
	DefaultShell     = execconf.DefaultShell
	DefaultRgPath    = execconf.DefaultRgPath
	DefaultCgroups   = "auto"
)

// NewConfig returns a configuration with every default set and no
// StateDir.
func NewConfig() Config {
	return Config{Exec: execconf.New(), Cgroups: DefaultCgroups, Limits: Limits{Limits: defaultLimits(cgroups.Limits{})}}
}

// withDefaults fills the zero fields from NewConfig.
func (c Config) withDefaults() Config {
	d := NewConfig()
	c.Exec = c.Exec.WithDefaults()
	if c.Cgroups == "" {
		c.Cgroups = d.Cgroups
	}
	c.Limits.Limits = defaultLimits(c.Limits.Limits)
	c.Sandbox = c.Sandbox.withDefaults()
	return c
}

// Validate reports every problem with c at once. It checks values only; New
// checks that the shell exists.
func (c Config) Validate() error {
	var errs []error
	if c.StateDir == "" {
		errs = append(errs, errors.New("stateDir is required"))
	} else if !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("stateDir %q is not absolute", c.StateDir))
	}
	errs = append(errs, c.Exec.Problems()...)
	switch c.Cgroups {
	case "", "auto", "v1", "v2", "off":
	default:
		errs = append(errs, fmt.Errorf("cgroups must be auto, v1, v2 or off, got %q", c.Cgroups))
	}
	// -1 (Unlimited) turns a default limit off.
	l := c.Limits
	l.Limits = withoutUnlimited(l.Limits)
	if l.DiskBytes == Unlimited {
		l.DiskBytes = 0
	}
	if err := l.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("limits (-1 for no memoryBytes, pids or diskBytes limit): %w", err))
	}
	if d := c.DefaultDiskBytes; d < 0 || d > 0 && d < loopfs.MinSize {
		errs = append(errs, fmt.Errorf("default disk size must be 0 (none) or at least %d, got %d", loopfs.MinSize, d))
	}
	if err := c.CommandLimits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("commandLimits: %w", err))
	}
	errs = append(errs, c.Sandbox.problems()...)
	return errors.Join(errs...)
}
