package broker_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// silentEngine is a backend whose engine does not answer.
type silentEngine struct{ opsapi.Backend }

func (silentEngine) Ping(context.Context) error {
	return opsapi.E("fake.Ping", "", opsapi.ErrUnavailable, errors.New("nobody answers on the socket"))
}

// TestReadinessFollowsBackends: /readyz is 503 `unavailable`, naming the
// backend, while one that can be pinged does not answer.
func TestReadinessFollowsBackends(t *testing.T) {
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	srv, err := broker.New(broker.Config{Tokens: []string{testToken}},
		map[string]opsapi.Backend{"local": b, "docker": silentEngine{}}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := checkProblem(t, resp, data, http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(p.Detail, "backend docker is not ready") {
		t.Fatalf("detail %q", p.Detail)
	}
}
