package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/execconf"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestServeConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "broker.yaml")
	yaml := "listen: 127.0.0.1:1111\nstateDir: /from/file\nlogLevel: warn\nshutdownGrace: 3s\nmaxUploadBytes: 1024\nlocal:\n  killGrace: 500ms\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		env   map[string]string
		flags []string
		want  serveConfig
	}{
		{
			name: "defaults",
			env:  map[string]string{"HOME": "/home/u"},
			want: serveConfig{Listen: "127.0.0.1:8722", StateDir: "/home/u/.local/state/wsbroker",
				TokenFile: "/home/u/.local/state/wsbroker/token", LogLevel: "info", ShutdownGrace: 10 * time.Second, DefaultBackend: "local",
				Local: local.Config{DefaultDiskBytes: local.RecommendedDiskBytes, StateDir: "/home/u/.local/state/wsbroker/local"}},
		},
		{
			name: "xdg",
			env:  map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/xdg"},
			want: serveConfig{Listen: "127.0.0.1:8722", StateDir: "/xdg/wsbroker",
				TokenFile: "/xdg/wsbroker/token", LogLevel: "info", ShutdownGrace: 10 * time.Second, DefaultBackend: "local",
				Local: local.Config{DefaultDiskBytes: local.RecommendedDiskBytes, StateDir: "/xdg/wsbroker/local"}},
		},
		{
			name:  "file",
			flags: []string{"--config", file},
			want: serveConfig{Listen: "127.0.0.1:1111", StateDir: "/from/file", TokenFile: "/from/file/token",
				LogLevel: "warn", ShutdownGrace: 3 * time.Second, MaxUploadBytes: 1024, DefaultBackend: "local",
				Local: local.Config{DefaultDiskBytes: local.RecommendedDiskBytes, StateDir: "/from/file/local", Exec: execconf.Exec{KillGrace: 500 * time.Millisecond}}},
		},
		{
			name: "env over file",
			env: map[string]string{"BROKER_CONFIG": file, "BROKER_LISTEN": "127.0.0.1:2222",
				"BROKER_TOKEN_FILE": "/env/tok", "BROKER_SHUTDOWN_GRACE": "1s"},
			want: serveConfig{Listen: "127.0.0.1:2222", StateDir: "/from/file", TokenFile: "/env/tok",
				LogLevel: "warn", ShutdownGrace: time.Second, MaxUploadBytes: 1024, DefaultBackend: "local",
				Local: local.Config{DefaultDiskBytes: local.RecommendedDiskBytes, StateDir: "/from/file/local", Exec: execconf.Exec{KillGrace: 500 * time.Millisecond}}},
		},
		{
			name:  "flags over env",
			env:   map[string]string{"BROKER_CONFIG": file, "BROKER_LISTEN": "127.0.0.1:2222", "BROKER_STATE_DIR": "/env/state"},
			flags: []string{"--listen", "127.0.0.1:3333", "--log-level", "debug", "--max-upload-bytes", "7"},
			want: serveConfig{Listen: "127.0.0.1:3333", StateDir: "/env/state", TokenFile: "/env/state/token",
				LogLevel: "debug", ShutdownGrace: 3 * time.Second, MaxUploadBytes: 7, DefaultBackend: "local",
				Local: local.Config{DefaultDiskBytes: local.RecommendedDiskBytes, StateDir: "/env/state/local", Exec: execconf.Exec{KillGrace: 500 * time.Millisecond}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &CLI{Stderr: &strings.Builder{}, Getenv: envMap(tc.env)}
			fs := c.flagSet("serve", "")
			f := bindFlags(fs)
			if err := parse(fs, tc.flags); err != nil {
				t.Fatal(err)
			}
			got, err := c.resolveServeConfig(fs, f)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestServeConfigRejectsMistakes(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("listn: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		env   map[string]string
		flags []string
		want  string
	}{
		"unknown key":    {flags: []string{"--config", typo}, want: "field listn not found"},
		"missing file":   {flags: []string{"--config", filepath.Join(dir, "nope.yaml")}, want: "no such file"},
		"bad level":      {flags: []string{"--log-level", "loud"}, want: "log level"},
		"bad env grace":  {env: map[string]string{"BROKER_SHUTDOWN_GRACE": "soon"}, want: "BROKER_SHUTDOWN_GRACE"},
		"negative grace": {flags: []string{"--shutdown-grace", "-1s"}, want: "negative"},
		"bad env max":    {env: map[string]string{"BROKER_MAX_UPLOAD_BYTES": "lots"}, want: "BROKER_MAX_UPLOAD_BYTES"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{"HOME": dir}
			for k, v := range tc.env {
				env[k] = v
			}
			c := &CLI{Stderr: &strings.Builder{}, Getenv: envMap(env)}
			fs := c.flagSet("serve", "")
			f := bindFlags(fs)
			if err := parse(fs, tc.flags); err != nil {
				t.Fatal(err)
			}
			_, err := c.resolveServeConfig(fs, f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEnsureTokenCreatesOnceWithMode0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "token")
	tok, created, err := ensureToken(path)
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v", created, err)
	}
	if len(tok) != 64 {
		t.Fatalf("token %q: want 64 hex characters", tok)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	again, created, err := ensureToken(path)
	if err != nil || created || again != tok {
		t.Fatalf("second call: tok=%q created=%v err=%v; want the same token, not created", again, created, err)
	}
}

func TestEmptyTokenFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ensureToken(path); err == nil {
		t.Fatal("an empty token file was accepted")
	}
}

// The example in the package documentation must load.
func TestDocumentedConfigExampleLoads(t *testing.T) {
	const example = `listen: 127.0.0.1:8722
stateDir: /var/lib/wsbroker
tokenFile: /etc/wsbroker/token   # default <stateDir>/token
logLevel: info                   # debug, info, warn, error
defaultBackend: docker           # of a create naming none; default docker when served, else local
shutdownGrace: 10s
maxUploadBytes: 268435456
maxArchiveBytes: 1073741824       # file content of one tar in or out (broker cp)
local:                           # the local backend (package local's Config)
  killGrace: 2s
  shell: /bin/bash
  cgroups: auto                  # auto, v1, v2, or off (process groups only)
  limits: {memoryBytes: 2147483648, pids: 1024, cpu: 2}  # per workspace; need cgroups
  # diskBytes: 1073741824      # each workspace a filesystem of this size; needs root
ssh:                             # the ssh backend, only when present (package ssh's Config)
  knownHostsFiles: [/etc/wsbroker/known_hosts]
  identityFiles: [/etc/wsbroker/id_ed25519]
  agent: false                   # also the keys of the ssh-agent at $SSH_AUTH_SOCK
  insecureIgnoreHostKey: false   # never outside a throwaway lab
  hosts:
    vm-01: {address: "10.0.3.11:22", user: agent}
http:                            # limits against hostile clients (docs/security.md)
  allowedHosts: [localhost, 127.0.0.1, "::1", broker.internal]  # Host names answered; others 421
  maxBodyBytesInFlight: 33554432 # request-body bytes held at once; past it 503
  bodyIdleTimeout: 30s           # a body that stalls this long ends
  minBodyRate: 4096              # bytes/s a body must keep up after bodyIdleTimeout
  maxConns: 4096                 # open connections; default also at most half the fd limit
  maxConnsPerPeer: 512           # open connections per client IP
`
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg serveConfig
	if err := loadConfigFile(path, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != "/var/lib/wsbroker" || cfg.DefaultBackend != "docker" || cfg.Local.KillGrace != 2*time.Second || cfg.Local.Shell != "/bin/bash" || cfg.MaxUploadBytes != 256<<20 {
		t.Fatalf("loaded %+v", cfg)
	}
	if cfg.Local.Cgroups != "auto" || cfg.Local.Limits.MemoryBytes != 2<<30 || cfg.Local.Limits.Pids != 1024 || cfg.Local.Limits.CPU != 2 {
		t.Fatalf("local limits loaded as %+v / %+v", cfg.Local.Cgroups, cfg.Local.Limits)
	}
	if cfg.SSH == nil || cfg.SSH.Hosts["vm-01"].User != "agent" || cfg.SSH.KnownHostsFiles[0] != "/etc/wsbroker/known_hosts" {
		t.Fatalf("ssh section loaded as %+v", cfg.SSH)
	}
	var bc broker.Config
	cfg.HTTP.apply(&bc)
	if len(bc.AllowedHosts) != 4 || bc.AllowedHosts[3] != "broker.internal" || bc.MaxBodyBytesInFlight != 32<<20 ||
		bc.BodyIdleTimeout != 30*time.Second || bc.MinBodyRate != 4096 || bc.MaxConns != 4096 || bc.MaxConnsPerPeer != 512 {
		t.Fatalf("http section applied as %+v", bc)
	}
}
