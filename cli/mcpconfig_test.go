package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeMCPConfig: the mcp section reaches package mcp's Config, its
// absence is the defaults, and a bad value stops serve.
func TestServeMCPConfig(t *testing.T) {
	resolve := func(t *testing.T, file string) (serveConfig, error) {
		t.Helper()
		dir := t.TempDir()
		env := map[string]string{"HOME": dir, "BROKER_STATE_DIR": filepath.Join(dir, "state"),
			"BROKER_CONFIG": filepath.Join(dir, "broker.yaml")}
		if err := os.WriteFile(env["BROKER_CONFIG"], []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		c := &CLI{Stderr: &strings.Builder{}, Getenv: envMap(env)}
		fs := c.flagSet("serve", "")
		f := bindFlags(fs)
		if err := parse(fs, nil); err != nil {
			t.Fatal(err)
		}
		return c.resolveServeConfig(fs, f)
	}
	cases := []struct {
		name, file string
		check      func(t *testing.T, cfg serveConfig)
		wantErr    string
	}{
		{name: "absent", file: "logLevel: info\n", check: func(t *testing.T, cfg serveConfig) {
			m, err := cfg.MCP.config()
			ps, perr := profilesOf(cfg)
			if err != nil || perr != nil || m.MaxSessionsPerTenant != 0 || len(ps) != 0 {
				t.Fatalf("%+v %v: want the zero Config, whose defaults mcp applies", m, err)
			}
		}},
		{name: "set", file: "mcp:\n  maxSessionsPerTenant: 4\n  idleTimeout: 90s\n  keepWorkspaces: true\n" +
			"  profiles:\n    py:\n      backend: docker\n      options: {image: python, memory: 512}\n",
			check: func(t *testing.T, cfg serveConfig) {
				m, err := cfg.MCP.config()
				if err != nil {
					t.Fatal(err)
				}
				ps, err := profilesOf(cfg)
				if err != nil {
					t.Fatal(err)
				}
				p := ps["py"]
				if m.MaxSessionsPerTenant != 4 || m.IdleTimeout != 90*time.Second || !m.KeepWorkspaces ||
					p.Backend != "docker" || string(p.Options) != `{"image":"python","memory":512}` {
					t.Fatalf("got %+v, profile %s %s", m, p.Backend, p.Options)
				}
			}},
		{name: "top-level profiles", file: "profiles:\n  py:\n    backend: docker\n    options: {image: python}\n" +
			"mcp:\n  profiles:\n    plain: {backend: local}\n",
			check: func(t *testing.T, cfg serveConfig) {
				ps, err := profilesOf(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if len(ps) != 2 || ps["py"].Backend != "docker" || string(ps["py"].Options) != `{"image":"python"}` ||
					ps["plain"].Backend != "local" || ps["plain"].Options != nil {
					t.Fatalf("profiles = %+v", ps)
				}
			}},
		{name: "profile in both places", file: "profiles:\n  py: {backend: docker}\nmcp:\n  profiles:\n    py: {backend: local}\n",
			wantErr: `profile "py" is configured both in profiles and in mcp.profiles`},
		{name: "negative cap", file: "mcp:\n  maxSessionsPerTenant: -1\n", wantErr: "session cap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := resolve(t, c.file)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, cfg)
		})
	}
}
