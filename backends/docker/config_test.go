package docker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/remote"
)

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"tcp host", func(c *Config) { c.Host = "tcp://10.0.0.5:2376" }, ""},
		{"bad host", func(c *Config) { c.Host = "docker.sock" }, `host "docker.sock"`},
		{"no image", func(c *Config) { c.DefaultImage = "" }, "defaultImage is required"},
		{"no identity", func(c *Config) { c.Identity = "" }, "identity"},
		{"identity with a space", func(c *Config) { c.Identity = "a b" }, "identity"},
		{"bad image pattern", func(c *Config) { c.AllowedImages = []string{"[a"} }, "bad pattern"},
		{"any image", func(c *Config) { c.AllowedImages = []string{"*"} }, ""},
		{"user with space", func(c *Config) { c.User = "a b" }, "is not a user"},
		{"tiny memory", func(c *Config) { c.Memory = 1 << 20 }, "memory must be at least 6 MiB"},
		{"negative cpus", func(c *Config) { c.CPUs = -1 }, "cpus must be positive"},
		{"few pids", func(c *Config) { c.Pids = 3 }, "pids must be at least"},
		{"no tmpfs", func(c *Config) { c.TmpfsSize = -1 }, "tmpfsSize must be positive"},
		{"empty allowed network", func(c *Config) { c.AllowedNetworks = []string{""} }, "allowedNetworks"},
		{"bad cap", func(c *Config) { c.CapAdd = []string{"NET ADMIN"} }, "bad capability"},
		{"relative seccomp", func(c *Config) { c.SeccompProfile = "p.json" }, "seccompProfile"},
		{"unconfined seccomp", func(c *Config) { c.SeccompProfile = "unconfined" }, ""},
		{"workspace /", func(c *Config) { c.WorkspaceDir = "/" }, "workspaceDir"},
		{"workspace under /proc", func(c *Config) { c.WorkspaceDir = "/proc/self/cwd" }, "workspaceDir"},
		{"relative workspace", func(c *Config) { c.WorkspaceDir = "ws" }, "workspaceDir"},
		{"negative ttl", func(c *Config) { c.IdleTTL = -time.Second }, "idleTTL"},
		{"bad sftp mode", func(c *Config) { c.SFTPServer = "ssh" }, "sftpServer"},
		{"relative agent binary", func(c *Config) { c.AgentBinary = "bin/x" }, "agentBinary"},
		{"relative sftp binary", func(c *Config) { c.SFTPServerBinary = "bin/x" }, "sftpServerBinary"},
		{"old binary name alone", func(c *Config) { c.SFTPServerBinary = "/bin/x" }, ""},
		{"old and new binary names differ", func(c *Config) { c.SFTPServerBinary = "/bin/x"; c.AgentBinary = "/bin/y" }, "differs from agentBinary"},
		{"image mode without paths", func(c *Config) { c.SFTPServer = SFTPImage; c.ImageSFTPServers = []string{} }, "needs imageSFTPServers"},
		{"relative image sftp path", func(c *Config) { c.ImageSFTPServers = []string{"sftp-server"} }, "imageSFTPServers"},
		{"negative grace", func(c *Config) { c.KillGrace = -time.Second }, "killGrace must be positive"},
		{"drain cap below idle", func(c *Config) { c.MaxDrain = time.Millisecond }, "maxDrain"},
		{"relative shell", func(c *Config) { c.Shell = "bash" }, "not an absolute path"},
		{"empty command", func(c *Config) { c.Command = []string{""} }, "command is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := NewConfig()
			cfg.Identity = "test-broker"
			c.mod(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestConfigZeroIsSecureDefaults(t *testing.T) {
	got := Config{Identity: "test-broker"}.withDefaults()
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	if got.Network != "none" || got.User != "1000:1000" || got.WritableRootfs || got.AllowNewPrivileges ||
		len(got.CapAdd) != 0 || got.SeccompProfile != "" || got.DefaultImage != "wsbroker/workspace:current" ||
		got.Memory != remote.DefaultMemory || got.Pids != DefaultPids || got.TmpfsSize != remote.DefaultTmpfsSize || got.SFTPServer != SFTPAuto {
		t.Fatalf("zero config does not give the secure defaults: %+v", got)
	}
}

func TestHomeTmpfs(t *testing.T) {
	b := &Backend{cfg: NewConfig()}
	for _, c := range []struct {
		env  []string
		want string // the home tmpfs options' owner part, "" for none
	}{
		{[]string{"PATH=/bin", "HOME=/home/agent"}, "uid=1000,gid=1000"},
		{[]string{"HOME=/"}, ""},
		{[]string{"HOME=/workspace"}, ""},
		{[]string{"HOME=/workspace/me"}, ""},
		{[]string{"HOME=/proc/self/cwd"}, ""},
		{[]string{"HOME=relative"}, ""},
		{nil, ""},
	} {
		m := b.tmpfs(homeOf(c.env))
		if !strings.Contains(m["/tmp"], "size=268435456") {
			t.Errorf("/tmp tmpfs %q", m["/tmp"])
		}
		home := ""
		for k, v := range m {
			if k != "/tmp" {
				home = v
			}
		}
		if (c.want == "") != (home == "") || !strings.Contains(home, c.want) {
			t.Errorf("env %v: home tmpfs %q, want one with %q", c.env, home, c.want)
		}
	}
}

func TestResolveOptions(t *testing.T) {
	b := &Backend{cfg: NewConfig()}
	b.cfg.AllowedImages = []string{"wsbroker/*"}
	b.cfg.AllowedNetworks = []string{"bridge"}
	for _, c := range []struct {
		name string
		opts string
		want string // error substring, "" for valid
	}{
		{"empty", `{}`, ""},
		{"lower limits", `{"limits":{"memory":"512MiB","cpus":0.5,"pids":100}}`, ""},
		{"memory above config", `{"limits":{"memory":"64GiB"}}`, "limits.memory"},
		{"cpus above config", `{"limits":{"cpus":8}}`, "limits.cpus"},
		{"pids above config", `{"limits":{"pids":100000}}`, "limits.pids"},
		{"allowed image", `{"image":"wsbroker/other:1"}`, ""},
		{"other image", `{"image":"alpine:3"}`, "not allowed"},
		{"allowed network", `{"network":"bridge"}`, ""},
		{"host network", `{"network":"host"}`, "not allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o createOptions
			if err := json.Unmarshal([]byte(c.opts), &o); err != nil {
				t.Fatal(err)
			}
			_, err := b.resolve(o)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error = %v, want one containing %q", err, c.want)
			}
		})
	}
}
