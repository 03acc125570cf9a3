package local

import (
	"reflect"

	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local/cgroups"
	"github.com/wsbroker/wsbroker/internal/execconf"
)

func TestConfigValidate(t *testing.T) {
	valid := NewConfig()
	valid.StateDir = "/var/lib/wsbroker"
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr []string // substrings; none means valid
	}{
		{"defaults with a state dir", func(c *Config) {}, nil},
		{"missing state dir", func(c *Config) { c.StateDir = "" }, []string{"stateDir is required"}},
		{"relative state dir", func(c *Config) { c.StateDir = "state" }, []string{"not absolute"}},
		{"zero grace", func(c *Config) { c.KillGrace = 0 }, []string{"killGrace must be positive"}},
		{"negative drain", func(c *Config) { c.DrainIdle = -time.Second }, []string{"drainIdle must be positive"}},
		{"cap below idle", func(c *Config) { c.DrainIdle, c.MaxDrain = time.Second, time.Millisecond }, []string{"maxDrain"}},
		{"relative shell", func(c *Config) { c.Shell = "bash" }, []string{"shell \"bash\" is not an absolute path"}},
		{"empty rg", func(c *Config) { c.RgPath = "" }, []string{"rgPath is required"}},
		{"sandbox mode", func(c *Config) { c.Sandbox.Mode = "yes" }, []string{"sandbox.mode must be auto, on or off"}},
		{"sandbox network", func(c *Config) { c.Sandbox.Network = "bridge" }, []string{"sandbox.network must be none or host"}},
		{"sandbox uids", func(c *Config) { c.Sandbox.UIDBase = 10 }, []string{"sandbox.uidBase 10"}},
		{"sandbox read path", func(c *Config) { c.Sandbox.ReadPaths = []string{"usr"} }, []string{`sandbox.readPaths: "usr" is not absolute`}},
		{"sandbox layer", func(c *Config) { c.Sandbox.Require = []string{"magic"} }, []string{`unknown layer "magic"`}},
		{"require without sandbox", func(c *Config) { c.Sandbox.Mode, c.Sandbox.Require = "off", []string{"user"} }, []string{"sandbox.require needs"}},
		{"no memory or pids limit", func(c *Config) { c.Limits.MemoryBytes, c.Limits.Pids = Unlimited, Unlimited }, nil},
		{"pids below -1", func(c *Config) { c.Limits.Pids = -2 }, []string{"-1 for no memoryBytes, pids or diskBytes limit", "pids must not be negative, got -2"}},
		{"no disk", func(c *Config) { c.Limits.DiskBytes, c.DefaultDiskBytes = Unlimited, RecommendedDiskBytes }, nil},
		{"disk below -1", func(c *Config) { c.Limits.DiskBytes = -2 }, []string{"-1 for no", "diskBytes must be 0 (none) or at least 8388608, got -2"}},
		{"default disk too small", func(c *Config) { c.DefaultDiskBytes = 4096 }, []string{"default disk size must be 0 (none) or at least 8388608, got 4096"}},
		{"unlimited cpu", func(c *Config) { c.Limits.CPU = -1 }, []string{"cpu must not be negative"}},
		{"unlimited command memory", func(c *Config) { c.CommandLimits.MemoryBytes = -1 }, []string{"commandLimits: memoryBytes must not be negative"}},
		{"every problem at once", func(c *Config) { *c = Config{} }, []string{"stateDir", "killGrace", "drainIdle", "maxDrain", "shell", "rgPath"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			err := c.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error mentioning %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{StateDir: "/s"}.withDefaults()
	want := Config{StateDir: "/s", Exec: execconf.Exec{KillGrace: 2 * time.Second, DrainIdle: 100 * time.Millisecond,
		MaxDrain: 5 * time.Second, Shell: "/bin/bash", RgPath: "rg"}, Cgroups: "auto",
		Limits:  Limits{Limits: cgroups.Limits{MemoryBytes: 2 << 30, Pids: 4096}},
		Sandbox: SandboxConfig{Mode: "auto", UIDBase: 1_500_000_000, UIDCount: 65536, Network: "none", ReadPaths: sandbox.DefaultReadPaths}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("withDefaults = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// Set fields are kept.
	c = Config{StateDir: "/s", Exec: execconf.Exec{KillGrace: time.Second, Shell: "/bin/sh"}}.withDefaults()
	if c.KillGrace != time.Second || c.Shell != "/bin/sh" {
		t.Fatalf("withDefaults overwrote set fields: %+v", c)
	}
}
