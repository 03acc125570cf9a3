package local

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/wsbroker/wsbroker/cgroups"
)

// Config configures the local backend. Zero fields take the defaults of
// NewConfig when the backend is built, so Config{StateDir: dir} is a
// complete configuration.
type Config struct {
	// StateDir holds the backend's state; each workspace is the directory
	// StateDir/workspaces/<id>. Required, absolute.
	StateDir string `json:"stateDir" yaml:"stateDir"`
	// KillGrace is the time between SIGTERM and SIGKILL when a command's
	// process tree is killed (deadline, cancel, Destroy). Default 2s.
	KillGrace time.Duration `json:"killGrace" yaml:"killGrace"`
	// DrainIdle is how long output must stay quiet after the shell exits
	// before the call returns; each chunk of late output re-arms it, so a
	// background child that keeps the pipe open but is silent releases the
	// call, while one still printing is still captured. Default 100ms, as
	// in pi.
	DrainIdle time.Duration `json:"drainIdle" yaml:"drainIdle"`
	// MaxDrain caps the draining after the shell exits, for background
	// children that never stop writing. Default 5s; it must be at least
	// DrainIdle.
	MaxDrain time.Duration `json:"maxDrain" yaml:"maxDrain"`
	// Shell runs every command as `Shell -c <command>`. Absolute path;
	// default /bin/bash.
	Shell string `json:"shell" yaml:"shell"`
	// RgPath is the ripgrep binary used by Search: a path, or a name
	// looked up on the broker's PATH when a search runs. Default "rg".
	RgPath string `json:"rgPath" yaml:"rgPath"`
	// Cgroups selects how commands are contained: "auto" (default) uses
	// cgroups where the broker may create them and falls back to process
	// groups and markers where it may not; "v1" or "v2" force a hierarchy
	// (failing to start if it cannot be used); "off" always uses the
	// fallback.
	Cgroups string `json:"cgroups" yaml:"cgroups"`
	// Limits are every workspace's default limits (a workspace's options
	// may set its own); zero fields mean no limit. They need cgroups.
	Limits cgroups.Limits `json:"limits" yaml:"limits"`
	// CommandLimits bound each command inside its workspace; zero fields
	// mean only the workspace's limits apply.
	CommandLimits cgroups.Limits `json:"commandLimits" yaml:"commandLimits"`
}

// Defaults.
const (
	DefaultKillGrace = 2 * time.Second
	DefaultDrainIdle = 100 * time.Millisecond
	DefaultMaxDrain  = 5 * time.Second
	DefaultShell     = "/bin/bash"
	DefaultRgPath    = "rg"
	DefaultCgroups   = "auto"
)

// NewConfig returns a configuration with every default set and no
// StateDir.
func NewConfig() Config {
	return Config{
		KillGrace: DefaultKillGrace,
		DrainIdle: DefaultDrainIdle,
		MaxDrain:  DefaultMaxDrain,
		Shell:     DefaultShell,
		RgPath:    DefaultRgPath,
		Cgroups:   DefaultCgroups,
	}
}

// withDefaults fills the zero fields from NewConfig.
func (c Config) withDefaults() Config {
	d := NewConfig()
	if c.KillGrace == 0 {
		c.KillGrace = d.KillGrace
	}
	if c.DrainIdle == 0 {
		c.DrainIdle = d.DrainIdle
	}
	if c.MaxDrain == 0 {
		c.MaxDrain = d.MaxDrain
	}
	if c.Shell == "" {
		c.Shell = d.Shell
	}
	if c.RgPath == "" {
		c.RgPath = d.RgPath
	}
	if c.Cgroups == "" {
		c.Cgroups = d.Cgroups
	}
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
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"killGrace", c.KillGrace}, {"drainIdle", c.DrainIdle}, {"maxDrain", c.MaxDrain}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	if c.DrainIdle > 0 && c.MaxDrain > 0 && c.MaxDrain < c.DrainIdle {
		errs = append(errs, fmt.Errorf("maxDrain (%v) is shorter than drainIdle (%v)", c.MaxDrain, c.DrainIdle))
	}
	if c.Shell == "" {
		errs = append(errs, errors.New("shell is required"))
	} else if !filepath.IsAbs(c.Shell) {
		errs = append(errs, fmt.Errorf("shell %q is not an absolute path", c.Shell))
	}
	if c.RgPath == "" {
		errs = append(errs, errors.New("rgPath is required"))
	}
	switch c.Cgroups {
	case "", "auto", "v1", "v2", "off":
	default:
		errs = append(errs, fmt.Errorf("cgroups must be auto, v1, v2 or off, got %q", c.Cgroups))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("limits: %w", err))
	}
	if err := c.CommandLimits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("commandLimits: %w", err))
	}
	return errors.Join(errs...)
}
