package adversarial_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/e2e/adversarial"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

const (
	memLimit  = 256 << 20
	pidsLimit = 256
	grace     = 500 * time.Millisecond
)

var limitOpts, _ = json.Marshal(map[string]any{"limits": map[string]any{"memoryBytes": memLimit, "pids": pidsLimit}})

func destroyAtCleanup(t *testing.T, ws opsapi.Workspace) {
	t.Cleanup(func() {
		if err := ws.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

func localBackend(t *testing.T) *local.Backend {
	b, err := local.New(local.Config{StateDir: t.TempDir(), Exec: execconf.Exec{KillGrace: grace}}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestLocal(t *testing.T) {
	testutil.RequireRoot(t) // limits need cgroups
	b := localBackend(t)
	n := 0
	adversarial.Run(t, adversarial.Options{
		New: func(t *testing.T) opsapi.Workspace {
			n++
			ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: fmt.Sprint("adv", n), Options: limitOpts})
			if err != nil {
				t.Fatal(err)
			}
			destroyAtCleanup(t, ws)
			return ws
		},
		MemoryLimit: memLimit, PidsLimit: pidsLimit, InProcess: true, Grace: grace, FullDir: tmpfsDir, LimitInStatus: true,
	})
}

func TestLocalHTTP(t *testing.T) {
	testutil.RequireRoot(t)
	b := localBackend(t)
	const token = "adversarial-token-0123456789"
	srv, err := broker.New(broker.Config{Tokens: []string{token}}, map[string]opsapi.Backend{"local": b}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	c := client.New(ts.URL, token)
	health := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	}
	adversarial.Run(t, adversarial.Options{
		New: func(t *testing.T) opsapi.Workspace {
			info, err := c.CreateWorkspace(context.Background(), "local", limitOpts)
			if err != nil {
				t.Fatal(err)
			}
			ws := c.WorkspaceFor(info)
			destroyAtCleanup(t, ws)
			return ws
		},
		MemoryLimit: memLimit, PidsLimit: pidsLimit, InProcess: true, Grace: grace, Health: health, LimitInStatus: true,
	})
}

// sftpBinary builds the static SFTP server the docker backend copies into
// its containers.
func sftpBinary(t *testing.T) string {
	out := filepath.Join(t.TempDir(), docker.SFTPServerName)
	build := exec.Command("go", "build", "-o", out, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building wsb-agent: %v\n%s", err, b)
	}
	return out
}

func TestDocker(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, "wsbroker/workspace:current")
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = sftpBinary(t)
	cfg.KillGrace = grace
	cfg.Memory = memLimit
	cfg.Pids = pidsLimit
	cfg.TmpfsSize = 16 << 20
	b, err := docker.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	n := 0
	adversarial.Run(t, adversarial.Options{
		New: func(t *testing.T) opsapi.Workspace {
			n++
			ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: fmt.Sprintf("adv-%d-%d", os.Getpid(), n)})
			if err != nil {
				t.Fatal(err)
			}
			destroyAtCleanup(t, ws)
			return ws
		},
		// The in-box agent runs each command under a subreaper, so the
		// env-clearing setsid escape is killed too.
		MemoryLimit: memLimit, PidsLimit: pidsLimit, Grace: grace,
		// /tmp is a size-limited tmpfs in the container.
		FullDir: func(*testing.T, opsapi.Workspace) string { return "/tmp" },
	})
}

func TestKubernetes(t *testing.T) {
	cfg := kubernetes.NewConfig()
	cfg.Kubeconfig = testutil.RequireKube(t)
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = sftpBinary(t)
	cfg.ImagePullPolicy = "Never"
	cfg.KillGrace = grace
	cfg.Memory = memLimit
	cfg.TmpfsSize = 16 << 20
	b, err := kubernetes.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	n := 0
	adversarial.Run(t, adversarial.Options{
		New: func(t *testing.T) opsapi.Workspace {
			n++
			ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: fmt.Sprintf("adv-%d-%d", os.Getpid(), n)})
			if err != nil {
				t.Fatal(err)
			}
			destroyAtCleanup(t, ws)
			return ws
		},
		// Commands run under the in-box agent's subreapers, so the
		// env-clearing setsid escape is killed too. A pod has no pids
		// limit of its own (the kubelet's podPidsLimit is node-wide), so
		// the fork bomb is left to the docker and local runs.
		MemoryLimit: memLimit, LimitInStatus: true, Grace: grace,
		// /tmp is a size-limited memory-backed volume in the pod.
		FullDir: func(*testing.T, opsapi.Workspace) string { return "/tmp" },
	})
}

func TestSSH(t *testing.T) {
	srv := sshtest.Start(t)
	cfg := ssh.NewConfig()
	cfg.KnownHostsFiles = []string{srv.KnownHosts}
	cfg.IdentityFiles = []string{srv.IdentityFile}
	cfg.Hosts = map[string]ssh.Host{"test": {Address: srv.Addr, User: srv.User}}
	cfg.AgentBinary = testutil.AgentBinary(t)
	cfg.KillGrace = grace
	b, err := ssh.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	n := 0
	adversarial.Run(t, adversarial.Options{
		New: func(t *testing.T) opsapi.Workspace {
			n++
			opts, _ := json.Marshal(map[string]string{"host": "test", "root": filepath.Join(srv.WorkDir(t), fmt.Sprint("ws", n))})
			ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: fmt.Sprint("adv", n), Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			destroyAtCleanup(t, ws)
			return ws
		},
		// Commands run under the in-box agent's subreapers, so the
		// env-clearing setsid escape is killed too.
		Grace: grace,
	})
}
