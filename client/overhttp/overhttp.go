package overhttp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/backendtest"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Token is the bearer token the served broker accepts.
const Token = "overhttp-token-0123456789"

// Options configure a run of the suite over HTTP.
type Options struct {
	// Backend returns the backend to serve (an error fails the test);
	// Serve closes it when its test ends.
	Backend func(t *testing.T) (opsapi.Backend, error)
	// PerCase serves a fresh broker and backend to every case, as a
	// backend whose cases must not share state (the local backend's
	// confinement cases watch the directory beside the workspace root)
	// needs; otherwise one broker serves every case.
	PerCase bool
	// CreateOptions are the create request's backend options for one
	// case; nil sends none.
	CreateOptions func(t *testing.T) json.RawMessage
	// Confined is backendtest.Options.Confined.
	Confined bool
}

// Run runs backendtest's suite on workspaces created and used through the
// broker and the client.
func Run(t *testing.T, o Options) {
	var shared *client.Client
	var name string
	if !o.PerCase {
		b := newBackend(t, o)
		shared, name = Serve(t, b), b.Name()
	}
	newWS := func(t *testing.T) opsapi.Workspace {
		c, backend := shared, name
		if o.PerCase {
			b := newBackend(t, o)
			c, backend = Serve(t, b), b.Name()
		}
		var opts json.RawMessage
		if o.CreateOptions != nil {
			opts = o.CreateOptions(t)
		}
		return Create(t, c, backend, opts)
	}
	t.Run("background", func(t *testing.T) {
		backgroundCases(t, func(t *testing.T) *client.Workspace { return newWS(t).(*client.Workspace) })
	})
	backendtest.Run(t, backendtest.Options{
		New:       newWS,
		Confined:  o.Confined,
		NoSignals: noSignals,
	})
}

// noSignals is why the signal cases skip over HTTP: the exec route
// carries stdin (an octet-stream body) but no signals; a background
// process's signal route does (the background cases).
const noSignals = "the exec route carries no signals; background processes take them (POST /processes/{proc}/signal)"

func newBackend(t *testing.T, o Options) opsapi.Backend {
	t.Helper()
	b, err := o.Backend(t)
	if err != nil {
		t.Fatalf("starting the backend: %v", err)
	}
	return b
}

// Serve serves b through the real broker on a loopback httptest server
// and returns a client for it. The server, the broker and b are closed
// when t ends.
func Serve(t *testing.T, b opsapi.Backend) *client.Client {
	t.Helper()
	srv, err := broker.New(broker.Config{Tokens: []string{Token}, DefaultBackend: b.Name()},
		map[string]opsapi.Backend{b.Name(): b}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
		_ = b.Close()
	})
	return client.New(ts.URL, Token, client.WithHTTPClient(ts.Client()))
}

// Create creates a workspace on backend over HTTP and deletes it when t
// ends.
func Create(t *testing.T, c *client.Client, backend string, opts json.RawMessage) opsapi.Workspace {
	t.Helper()
	info, err := c.CreateWorkspace(context.Background(), backend, opts)
	if err != nil {
		t.Fatalf("creating a %s workspace over HTTP: %v", backend, err)
	}
	ws := c.WorkspaceFor(info)
	t.Cleanup(func() {
		if err := ws.Destroy(context.Background()); err != nil {
			t.Errorf("deleting workspace %s: %v", info.ID, err)
		}
	})
	return ws
}
