package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// buildSFTPServer builds cmd/wsb-agent static into a temporary
// directory, as make build puts it beside the broker.
func buildSFTPServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), docker.SFTPServerName)
	build := exec.Command("go", "build", "-o", bin, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building wsb-agent: %v\n%s", err, out)
	}
	return bin
}

// TestServeDockerConfig: the docker section and flags are read into
// docker.Config, and without either the backend is off (so a zero-config
// start needs no engine). Nothing here reaches the engine.
func TestServeDockerConfig(t *testing.T) {
	resolve := func(t *testing.T, file string, flags ...string) serveConfig {
		t.Helper()
		dir := t.TempDir()
		env := map[string]string{"HOME": dir, "BROKER_STATE_DIR": filepath.Join(dir, "state")}
		if file != "" {
			env["BROKER_CONFIG"] = filepath.Join(dir, "broker.yaml")
			if err := os.WriteFile(env["BROKER_CONFIG"], []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c := &CLI{Stderr: &strings.Builder{}, Getenv: envMap(env)}
		fs := c.flagSet("serve", "")
		f := bindFlags(fs)
		if err := parse(fs, flags); err != nil {
			t.Fatal(err)
		}
		cfg, err := c.resolveServeConfig(fs, f)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Run("none", func(t *testing.T) {
		if cfg := resolve(t, "logLevel: info\n"); cfg.Docker != nil {
			t.Fatalf("docker section %+v without one in the file", cfg.Docker)
		}
		_, backends, err := serveBackends(t, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := backends["docker"]; ok || len(backends) != 1 {
			t.Fatalf("backends %v: want only local in a zero-config start", backends)
		}
	})
	t.Run("file", func(t *testing.T) {
		cfg := resolve(t, "docker:\n  host: tcp://10.0.0.5:2376\n  memory: 512MiB\n  idleTTL: 1h\n  allowedImages: [\"wsbroker/*\"]\n")
		if cfg.Docker == nil || cfg.Docker.Host != "tcp://10.0.0.5:2376" || cfg.Docker.Memory != 512<<20 ||
			cfg.Docker.IdleTTL.Hours() != 1 || len(cfg.Docker.AllowedImages) != 1 {
			t.Fatalf("docker section read as %+v", cfg.Docker)
		}
	})
	t.Run("empty section", func(t *testing.T) {
		if cfg := resolve(t, "docker: {}\n"); cfg.Docker == nil || cfg.Docker.Host != "" {
			t.Fatalf("docker: {} read as %+v, want an all-defaults section", cfg.Docker)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "broker.yaml")
		if err := os.WriteFile(path, []byte("docker:\n  memroy: 1GiB\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg serveConfig
		if err := loadConfigFile(path, &cfg); err == nil || !strings.Contains(err.Error(), "memroy") {
			t.Fatalf("err = %v, want the misspelt key refused", err)
		}
	})
	t.Run("flags", func(t *testing.T) {
		if cfg := resolve(t, "", "--docker"); cfg.Docker == nil || !reflect.DeepEqual(*cfg.Docker, docker.Config{}) {
			t.Fatalf("--docker gave %+v, want an all-defaults section", cfg.Docker)
		}
		if cfg := resolve(t, "", "--docker-host", "unix:///run/other.sock"); cfg.Docker == nil || cfg.Docker.Host != "unix:///run/other.sock" {
			t.Fatalf("--docker-host gave %+v", cfg.Docker)
		}
		if cfg := resolve(t, "docker:\n  memory: 1GiB\n", "--docker-host", "tcp://h:2376"); cfg.Docker.Host != "tcp://h:2376" || cfg.Docker.Memory != 1<<30 {
			t.Fatalf("--docker-host over the file gave %+v", cfg.Docker)
		}
		if cfg := resolve(t, "", "--docker=false"); cfg.Docker != nil {
			t.Fatal("docker backend enabled by a flag that says no")
		}
		if cfg := resolve(t, "docker: {}\n", "--docker=false"); cfg.Docker != nil {
			t.Fatal("--docker=false did not turn the file's section off")
		}
	})
	t.Run("bad values stop serve", func(t *testing.T) {
		_, _, err := serveBackends(t, "docker:\n  workspaceDir: relative\n")
		if err == nil || !strings.Contains(err.Error(), "docker backend") || !strings.Contains(err.Error(), "workspaceDir") {
			t.Fatalf("err = %v, want the docker backend refusing a bad workspaceDir", err)
		}
	})
}

// TestServeDefaultBackend: serving docker (--docker, --docker-host or a
// docker section) makes it the backend of a create that names none, a
// configured default wins, and a default that is not served stops serve.
// Nothing here reaches the engine.
func TestServeDefaultBackend(t *testing.T) {
	cases := []struct {
		name, file string
		env        map[string]string
		flags      []string
		want       string // the default, or the error it stops with
	}{
		{name: "zero config", want: "local"},
		{name: "--docker", flags: []string{"--docker"}, want: "docker"},
		{name: "--docker-host", flags: []string{"--docker-host", "tcp://h:2376"}, want: "docker"},
		{name: "docker section", file: "docker: {}\n", want: "docker"},
		{name: "section turned off", file: "docker: {}\n", flags: []string{"--docker=false"}, want: "local"},
		{name: "ssh alone", flags: []string{"--ssh-insecure-ignore-host-key"}, want: "local"},
		{name: "file's default", file: "defaultBackend: local\ndocker: {}\n", want: "local"},
		{name: "env over file", file: "defaultBackend: local\ndocker: {}\n", env: map[string]string{"BROKER_DEFAULT_BACKEND": "docker"}, want: "docker"},
		{name: "flag over env", env: map[string]string{"BROKER_DEFAULT_BACKEND": "docker"}, flags: []string{"--docker", "--default-backend", "local"}, want: "local"},
		{name: "not served", flags: []string{"--default-backend", "docker"}, want: `default backend "docker" is not served (served: local)`},
		{name: "unknown", flags: []string{"--docker", "--default-backend", "dokker"}, want: `default backend "dokker" is not served (served: docker, local)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{"HOME": dir}
			for k, v := range tc.env {
				env[k] = v
			}
			if tc.file != "" {
				env["BROKER_CONFIG"] = filepath.Join(dir, "broker.yaml")
				if err := os.WriteFile(env["BROKER_CONFIG"], []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := &CLI{Stderr: &strings.Builder{}, Getenv: envMap(env)}
			fs := c.flagSet("serve", "")
			f := bindFlags(fs)
			if err := parse(fs, tc.flags); err != nil {
				t.Fatal(err)
			}
			cfg, err := c.resolveServeConfig(fs, f)
			got := cfg.DefaultBackend
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("default backend: got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestServeDockerBackendReachesEngine: the backend serve builds from a
// config file creates a container on the local engine and runs a command
// in it with the hardened defaults.
func TestServeDockerBackendReachesEngine(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	bin := buildSFTPServer(t)
	_, backends, err := serveBackends(t, "docker:\n  agentBinary: "+bin+"\n  killGrace: 500ms\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := backends["local"]; !ok {
		t.Fatalf("backends %v: local is gone", backends)
	}
	db, ok := backends["docker"].(*docker.Backend)
	if !ok {
		t.Fatalf("backends %v: no docker backend", backends)
	}
	ws, err := db.Create(t.Context(), opsapi.WorkspaceSpec{ID: "cli-docker-" + strings.ToLower(rand.Text()[:8])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	res, err := ws.(opsapi.BashOperations).Exec(t.Context(), opsapi.ExecRequest{Command: "id -u; pwd", Output: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "1000\n"+ws.Root()+"\n" {
		t.Fatalf("exec: %+v %v %q", res, err, out.String())
	}
	if err := ws.(opsapi.WriteOperations).WriteFile(t.Context(), ws.Root()+"/f.txt", strings.NewReader("hi")); err != nil {
		t.Fatalf("write over sftp: %v", err)
	}
}

// TestBrokerIdentity: without a configured identity, serve makes one and
// keeps it in the state directory, so a restart adopts its own
// workspaces; a configured one wins; a bad one stops the docker backend.
func TestBrokerIdentity(t *testing.T) {
	dir := t.TempDir()
	c := &CLI{Stderr: &strings.Builder{}, Getenv: envMap(map[string]string{"HOME": dir})}
	cfg := serveConfig{StateDir: filepath.Join(dir, "state"), TokenFile: filepath.Join(dir, "state", "token")}
	first := cfg
	if err := c.prepareState(&first); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Identity, "wsb-") || len(first.Identity) != 16 {
		t.Fatalf("made identity %q, want wsb- and 12 hex digits", first.Identity)
	}
	second := cfg
	if err := c.prepareState(&second); err != nil || second.Identity != first.Identity {
		t.Fatalf("after a restart: %q, %v; want %q", second.Identity, err, first.Identity)
	}
	named := cfg
	named.Identity = "replicas-a"
	if err := c.prepareState(&named); err != nil || named.Identity != "replicas-a" {
		t.Fatalf("configured identity became %q, %v", named.Identity, err)
	}
	_, _, err := serveBackends(t, "identity: \"bad identity\"\ndocker: {}\n")
	if err == nil || !strings.Contains(err.Error(), "identity") {
		t.Fatalf("a bad identity: %v, want the docker backend refusing it", err)
	}
}

// TestOneBrokerPerStateDirectory: a second broker on a state directory in
// use is refused with a message naming the first one's pid; once the
// first lets go, the directory can be taken again.
func TestOneBrokerPerStateDirectory(t *testing.T) {
	dir := t.TempDir()
	release, err := lockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockState(dir)
	if err == nil || !strings.Contains(err.Error(), "in use by another broker (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Fatalf("second lock: %v, want the directory in use by pid %d", err, os.Getpid())
	}
	release()
	again, err := lockState(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}
