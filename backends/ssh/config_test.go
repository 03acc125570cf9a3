package ssh

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := NewConfig()
		c.KnownHostsFiles = []string{"/etc/ssh/ssh_known_hosts"}
		c.IdentityFiles = []string{"/keys/id_ed25519"}
		c.Hosts = map[string]Host{"vm1": {Address: "10.0.0.5", User: "agent"}}
		return c
	}
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" means valid
	}{
		{"defaults with keys and a host", func(*Config) {}, ""},
		{"no known_hosts", func(c *Config) { c.KnownHostsFiles = nil }, "knownHostsFiles is required"},
		{"insecure without known_hosts", func(c *Config) { c.KnownHostsFiles = nil; c.InsecureIgnoreHostKey = true }, ""},
		{"no auth", func(c *Config) { c.IdentityFiles = nil }, "no authentication"},
		{"agent only", func(c *Config) { c.IdentityFiles = nil; c.Agent = true }, ""},
		{"host without user", func(c *Config) { c.Hosts["x"] = Host{Address: "h:22"} }, `host "x": user is required`},
		{"host without address", func(c *Config) { c.Hosts["x"] = Host{User: "u"} }, `host "x": address is required`},
		{"bad address", func(c *Config) { c.Hosts["x"] = Host{Address: "h:22:33", User: "u"} }, `host "x": address`},
		{"bad host name", func(c *Config) { c.Hosts["a/b"] = Host{Address: "h", User: "u"} }, "not a simple name"},
		{"workspaceDir /", func(c *Config) { c.Hosts["x"] = Host{Address: "h", User: "u", WorkspaceDir: "/"} }, "must not be /"},
		{"negative grace", func(c *Config) { c.KillGrace = -time.Second }, "killGrace must be positive"},
		{"drain cap below idle", func(c *Config) { c.MaxDrain = time.Millisecond }, "maxDrain"},
		{"too few sessions", func(c *Config) { c.MaxSessions = 3 }, "maxSessions"},
		{"relative shell", func(c *Config) { c.Shell = "bash" }, "not an absolute path"},
		{"relative agent binary", func(c *Config) { c.AgentBinary = "wsb-agent" }, `agentBinary "wsb-agent" is not an absolute path`},
		{"relative deprecated agent binary", func(c *Config) { c.InboxAgentBinary = "wsb-agent" }, "inboxAgentBinary (deprecated: agentBinary)"},
		{"alias agrees", func(c *Config) { c.AgentBinary = "/a"; c.InboxAgentBinary = "/a" }, ""},
		{"alias differs", func(c *Config) { c.AgentBinary = "/a"; c.InboxAgentBinary = "/b" }, "differ"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base()
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
	if got := (Config{}).withDefaults(); got.MaxSessions != DefaultMaxSessions || got.Shell != execconf.DefaultShell {
		t.Fatalf("withDefaults: %+v", got)
	}
	if a, err := normalizeAddr("example.org"); err != nil || a != "example.org:22" {
		t.Fatalf("normalizeAddr = %q, %v", a, err)
	}
}

// TestAgentBinaryKeys: agentBinary names the in-box agent; the old key
// inboxAgentBinary still does, with one warning at New.
func TestAgentBinaryKeys(t *testing.T) {
	bin := testutil.AgentBinary(t)
	for _, key := range []string{"agentBinary", "inboxAgentBinary"} {
		t.Run(key, func(t *testing.T) {
			doc := "insecureIgnoreHostKey: true\nagent: true\n" + key + ": " + bin + "\n"
			var cfg Config
			dec := yaml.NewDecoder(strings.NewReader(doc))
			dec.KnownFields(true) // as broker serve reads its file
			if err := dec.Decode(&cfg); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			b, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.agent == nil || b.agent.Path != bin {
				t.Fatalf("agent binary %+v, want %s", b.agent, bin)
			}
			warned := strings.Count(logs.String(), "inboxAgentBinary is deprecated")
			if want := map[string]int{"agentBinary": 0, "inboxAgentBinary": 1}[key]; warned != want {
				t.Fatalf("%d deprecation warnings, want %d:\n%s", warned, want, logs.String())
			}
		})
	}
}
