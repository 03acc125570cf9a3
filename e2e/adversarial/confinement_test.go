package adversarial_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// localBroker serves a local backend configured by sb over real HTTP and
// returns a client of it.
func localBroker(t *testing.T, sb local.SandboxConfig) *client.Client {
	t.Helper()
	b, err := local.New(local.Config{StateDir: t.TempDir(), Sandbox: sb}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	const token = "confinement-token-0123456789"
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
	return client.New(ts.URL, token)
}

// getConfinement creates a workspace and reads its confinement back with
// GET /v1/workspaces/{id}.
func getConfinement(t *testing.T, c *client.Client) wire.Confinement {
	t.Helper()
	info, err := c.CreateWorkspace(t.Context(), "local", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteWorkspace(context.Background(), info.ID) })
	got, err := c.GetWorkspace(t.Context(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Confinement == nil {
		t.Fatalf("GET /v1/workspaces/%s has no confinement: %+v", info.ID, got)
	}
	return *got.Confinement
}

// TestLocalConfinementOverHTTP: a workspace's effective confinement is in
// GET /v1/workspaces/{id}, layer by layer, sandboxed and not; a required
// layer the host lacks refuses the create with 503.
func TestLocalConfinementOverHTTP(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("sandboxed", func(t *testing.T) {
		c := getConfinement(t, localBroker(t, local.SandboxConfig{Mode: "on"}))
		want := wire.Confinement{
			Sandboxed: true, User: true, UID: c.UID, NoNewPrivs: true, PrivateTmp: true, Network: sandbox.NetworkNone,
			LandlockABI: min(sandbox.LandlockABI(), 7), Seccomp: true, PIDNamespace: false, Cgroup: c.Cgroup,
		}
		if c != want || c.UID < local.DefaultSandboxUIDBase {
			t.Errorf("confinement %+v, want %+v with a uid from %d", c, want, local.DefaultSandboxUIDBase)
		}
		if !c.Cgroup {
			testutil.SkipOrFail(t, "cgroups unavailable here: the cgroup layer is not shown holding")
		}
	})
	t.Run("unsandboxed", func(t *testing.T) {
		c := getConfinement(t, localBroker(t, local.SandboxConfig{Mode: "off"}))
		if want := (wire.Confinement{Network: sandbox.NetworkHost, Cgroup: c.Cgroup}); c != want {
			t.Errorf("confinement %+v, want %+v", c, want)
		}
	})
	t.Run("a required layer that does not hold refuses the create", func(t *testing.T) {
		cl := localBroker(t, local.SandboxConfig{Mode: "on", Require: []string{"seccomp", "pidNamespace"}})
		_, err := cl.CreateWorkspace(t.Context(), "local", nil)
		if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "pidNamespace") || strings.Contains(err.Error(), "seccomp") {
			t.Errorf("create requiring a pid namespace: %v, want unavailable naming pidNamespace alone", err)
		}
	})
}
