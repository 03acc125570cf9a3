package local

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/wsbroker/wsbroker/backends/shared/execconf"
	"github.com/wsbroker/wsbroker/cgroups"
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
	// Limits are every workspace's default limits (a workspace's options
	// may set its own); zero fields mean no limit. They need cgroups.
	Limits cgroups.Limits `json:"limits" yaml:"limits"`
	// CommandLimits bound each command inside its workspace; zero fields
	// mean only the workspace's limits apply.
	CommandLimits cgroups.Limits `json:"commandLimits" yaml:"commandLimits"`
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
	return Config{Exec: execconf.New(), Cgroups: DefaultCgroups}
}

// withDefaults fills the zero fields from NewConfig.
func (c Config) withDefaults() Config {
	d := NewConfig()
	c.Exec = c.Exec.WithDefaults()
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
	errs = append(errs, c.Exec.Problems()...)
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
