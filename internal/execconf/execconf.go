package execconf

import (
	"errors"
	"fmt"
	"path"
	"time"
)

// Exec configures how a backend runs commands and searches.
type Exec struct {
	// KillGrace is the time between SIGTERM and SIGKILL when a command's
	// process tree is killed (deadline, cancel, Destroy). Default 2s.
	KillGrace time.Duration `json:"killGrace" yaml:"killGrace"`
	// DrainIdle is how long output must stay quiet after the shell exits
	// before the call returns; each chunk of late output re-arms it, so a
	// background child that keeps the output open but is silent releases
	// the call, while one still printing is still captured. Default
	// 100ms, as in pi.
	DrainIdle time.Duration `json:"drainIdle" yaml:"drainIdle"`
	// MaxDrain caps the draining after the shell exits, for background
	// children that never stop writing. Default 5s; it must be at least
	// DrainIdle.
	MaxDrain time.Duration `json:"maxDrain" yaml:"maxDrain"`
	// Shell runs every command as `Shell -c <command>` where the
	// workspace lives. Absolute path; default /bin/bash.
	Shell string `json:"shell" yaml:"shell"`
	// RgPath is ripgrep where the workspace lives, for the grep tool: a
	// path or a name looked up on PATH. Default "rg".
	RgPath string `json:"rgPath" yaml:"rgPath"`
}

// Defaults.
const (
	DefaultKillGrace = 2 * time.Second
	DefaultDrainIdle = 100 * time.Millisecond
	DefaultMaxDrain  = 5 * time.Second
	DefaultShell     = "/bin/bash"
	DefaultRgPath    = "rg"
)

// New returns the block with every default set.
func New() Exec {
	return Exec{
		KillGrace: DefaultKillGrace,
		DrainIdle: DefaultDrainIdle,
		MaxDrain:  DefaultMaxDrain,
		Shell:     DefaultShell,
		RgPath:    DefaultRgPath,
	}
}

// WithDefaults fills the zero fields from New.
func (e Exec) WithDefaults() Exec {
	d := New()
	if e.KillGrace == 0 {
		e.KillGrace = d.KillGrace
	}
	if e.DrainIdle == 0 {
		e.DrainIdle = d.DrainIdle
	}
	if e.MaxDrain == 0 {
		e.MaxDrain = d.MaxDrain
	}
	if e.Shell == "" {
		e.Shell = d.Shell
	}
	if e.RgPath == "" {
		e.RgPath = d.RgPath
	}
	return e
}

// DurationProblems reports the block's durations that are not positive
// and a MaxDrain shorter than DrainIdle, in that order.
func (e Exec) DurationProblems() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"killGrace", e.KillGrace}, {"drainIdle", e.DrainIdle}, {"maxDrain", e.MaxDrain}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	if e.DrainIdle > 0 && e.MaxDrain > 0 && e.MaxDrain < e.DrainIdle {
		errs = append(errs, fmt.Errorf("maxDrain (%v) is shorter than drainIdle (%v)", e.MaxDrain, e.DrainIdle))
	}
	return errs
}

// ProgramProblems reports a shell that is missing or not absolute and a
// missing rgPath, in that order.
func (e Exec) ProgramProblems() []error {
	var errs []error
	if e.Shell == "" {
		errs = append(errs, errors.New("shell is required"))
	} else if !path.IsAbs(e.Shell) {
		errs = append(errs, fmt.Errorf("shell %q is not an absolute path", e.Shell))
	}
	if e.RgPath == "" {
		errs = append(errs, errors.New("rgPath is required"))
	}
	return errs
}

// Problems is DurationProblems then ProgramProblems.
func (e Exec) Problems() []error {
	return append(e.DurationProblems(), e.ProgramProblems()...)
}
