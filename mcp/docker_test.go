package mcp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// TestDockerEndpoints: a few calls on the docker backend answer over MCP
// what they answer over the HTTP tool route, on the workspace endpoint;
// and /v1/mcp?backend=docker makes a container workspace.
func TestDockerEndpoints(t *testing.T) {
	testutil.RequireDocker(t)
	testutil.RequireImage(t, docker.DefaultImage)
	bin := filepath.Join(t.TempDir(), docker.SFTPServerName)
	build := exec.Command("go", "build", "-o", bin, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building wsb-agent: %v\n%s", err, out)
	}
	cfg := docker.NewConfig()
	cfg.Identity = testutil.BrokerIdentity
	cfg.AgentBinary = bin
	cfg.KillGrace = 500 * time.Millisecond
	db, err := docker.New(cfg, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	lb, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	h := newHarness(t, nil, map[string]opsapi.Backend{"local": lb, "docker": db}, nil)
	a, b := h.createOn(aliceToken, "docker", nil), h.createOn(aliceToken, "docker", nil)
	t.Cleanup(func() {
		h.do(aliceToken, "DELETE", "/v1/workspaces/"+a.ID, nil, nil)
		h.do(aliceToken, "DELETE", "/v1/workspaces/"+b.ID, nil, nil)
	})
	cs := h.mustConnect(aliceToken, "/v1/workspaces/"+b.ID+"/mcp", nil)
	compareRoutes(t, h, a, b, cs, []toolCall{
		{"write", map[string]any{"path": "a.txt", "content": "hello\n"}},
		{"read", map[string]any{"path": "a.txt"}},
		{"bash", map[string]any{"command": "id -u; cat a.txt"}},
		{"ls", map[string]any{}},
	})
	start := time.Now().Add(-time.Second)
	sess := h.mustConnect(aliceToken, "/v1/mcp?backend=docker", nil)
	if res := callMCP(t, sess, "bash", map[string]any{"command": "id -u"}); text(res) != "1000\n" {
		t.Fatalf("session workspace: %q", text(res))
	}
	// The engine may hold other runs' containers, which the broker adopts:
	// only the ones made here count.
	var made []string
	for _, w := range h.workspaces(aliceToken) {
		if w.Backend == "docker" && w.CreatedAt.After(start) && w.ID != a.ID && w.ID != b.ID {
			made = append(made, w.ID)
		}
	}
	if len(made) != 1 {
		t.Fatalf("/v1/mcp?backend=docker made %v, want one docker workspace", made)
	}
	_ = sess.Close()
	eventually(t, "the session's container to go", func() bool {
		for _, w := range h.workspaces(aliceToken) {
			if w.ID == made[0] {
				return false
			}
		}
		return true
	})
}
