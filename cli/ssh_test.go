package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// sshKeyFiles writes an identity file and a known_hosts file that ssh.New
// accepts.
func sshKeyFiles(t *testing.T) (identity, knownHosts string) {
	t.Helper()
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := xssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	identity = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(identity, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := xssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	knownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(knownhosts.Line([]string{"10.0.3.11:22"}, key)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return identity, knownHosts
}

// serveBackends resolves serve's configuration from a config file body
// and flags, and builds its backends as serve does.
func serveBackends(t *testing.T, file string, flags ...string) (serveConfig, map[string]opsapi.Backend, error) {
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
	if err := c.prepareState(&cfg); err != nil {
		t.Fatal(err)
	}
	backends, closeAll, err := newBackends(cfg, testutil.Logger(t))
	if err == nil {
		t.Cleanup(closeAll)
	}
	return cfg, backends, err
}

func TestServeSSHSectionRegistersBackend(t *testing.T) {
	identity, kh := sshKeyFiles(t)
	file := fmt.Sprintf(`ssh:
  knownHostsFiles: [%s]
  identityFiles: [%s]
  keepaliveInterval: 5s
  hosts:
    vm-01: {address: "10.0.3.11:22", user: agent, workspaceDir: ".wsbroker/workspaces"}
`, kh, identity)

	t.Run("file", func(t *testing.T) {
		cfg, backends, err := serveBackends(t, file)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := backends["ssh"].(*ssh.Backend); !ok {
			t.Fatalf("backends %v: no ssh backend", backends)
		}
		if _, ok := backends["local"]; !ok {
			t.Fatalf("backends %v: local is gone", backends)
		}
		if h := cfg.SSH.Hosts["vm-01"]; h.User != "agent" || h.Address != "10.0.3.11:22" || cfg.SSH.KeepaliveInterval.Seconds() != 5 {
			t.Fatalf("ssh section read as %+v", cfg.SSH)
		}
	})
	t.Run("none", func(t *testing.T) {
		_, backends, err := serveBackends(t, "logLevel: info\n")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := backends["ssh"]; ok || len(backends) != 1 {
			t.Fatalf("backends %v: want only local without an ssh section", backends)
		}
	})
	t.Run("flags", func(t *testing.T) {
		cfg, backends, err := serveBackends(t, "",
			"--ssh-known-hosts", kh, "--ssh-identity", identity, "--ssh-host", "vm-02=agent@10.0.3.12")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := backends["ssh"].(*ssh.Backend); !ok {
			t.Fatalf("backends %v: no ssh backend", backends)
		}
		if cfg.SSH.InsecureIgnoreHostKey || cfg.SSH.KnownHostsFiles[0] != kh || cfg.SSH.Hosts["vm-02"] != (ssh.Host{Address: "10.0.3.12", User: "agent"}) {
			t.Fatalf("ssh flags read as %+v", cfg.SSH)
		}
	})
	t.Run("flags over file", func(t *testing.T) {
		other, _ := sshKeyFiles(t)
		cfg, _, err := serveBackends(t, file, "--ssh-identity", other, "--ssh-host", "vm-02=agent@10.0.3.12:2222")
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.SSH.IdentityFiles) != 1 || cfg.SSH.IdentityFiles[0] != other || len(cfg.SSH.Hosts) != 2 {
			t.Fatalf("ssh section after flags: %+v", cfg.SSH)
		}
	})
	t.Run("insecure=false alone stays off", func(t *testing.T) {
		_, backends, err := serveBackends(t, "", "--ssh-insecure-ignore-host-key=false")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := backends["ssh"]; ok {
			t.Fatal("ssh backend enabled by a flag that says no")
		}
	})
	t.Run("host keys are required", func(t *testing.T) {
		_, _, err := serveBackends(t, "ssh:\n  identityFiles: ["+identity+"]\n")
		if err == nil || !strings.Contains(err.Error(), "ssh backend") || !strings.Contains(err.Error(), "knownHostsFiles is required") {
			t.Fatalf("err = %v, want the ssh backend refusing to start without known_hosts", err)
		}
	})
}

// TestServeSSHBackendReachesHost: the backend serve builds from a config
// file logs in to a real sshd with the configured keys and host.
func TestServeSSHBackendReachesHost(t *testing.T) {
	srv := sshtest.Start(t)
	_, backends, err := serveBackends(t, fmt.Sprintf(`ssh:
  knownHostsFiles: [%s]
  identityFiles: [%s]
  hosts:
    lab: {address: "%s", user: %s}
`, srv.KnownHosts, srv.IdentityFile, srv.Addr, srv.User))
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := json.Marshal(map[string]string{"host": "lab", "root": srv.WorkDir(t) + "/ws"})
	ws, err := backends["ssh"].Create(t.Context(), opsapi.WorkspaceSpec{ID: "cli", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	res, err := ws.(opsapi.BashOperations).Exec(t.Context(), opsapi.ExecRequest{Command: "id -un; pwd", Output: &out})
	if err != nil || res.ExitCode != 0 || out.String() != srv.User+"\n"+ws.Root()+"\n" {
		t.Fatalf("exec: %+v %v %q", res, err, out.String())
	}
}
