package workspaces_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

func profileService(t *testing.T, ps map[string]workspaces.Profile) (*workspaces.Service, error) {
	t.Helper()
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	at, err := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken("alice-token")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tenant.NewRegistry(at)
	if err != nil {
		t.Fatal(err)
	}
	return workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": b}, DefaultBackend: "local",
		Tenants: reg, Profiles: ps}, testutil.Logger(t))
}

// TestProfilesConfig: New refuses an unnamed profile and options that are
// not a JSON object.
func TestProfilesConfig(t *testing.T) {
	for name, c := range map[string]struct {
		ps   map[string]workspaces.Profile
		want string
	}{
		"unnamed":    {map[string]workspaces.Profile{"": {}}, "empty name"},
		"not object": {map[string]workspaces.Profile{"x": {Options: json.RawMessage(`[1]`)}}, `profile "x": options must be a JSON object`},
		"fine":       {map[string]workspaces.Profile{"py": {Backend: "local", Options: json.RawMessage(`{"limits":{}}`)}}, ""},
	} {
		_, err := profileService(t, c.ps)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

// TestCreateSpec: a profile resolves alone; with a backend or options, or
// unknown, it is ErrInvalid; without one the backend and options pass.
func TestCreateSpec(t *testing.T) {
	svc, err := profileService(t, map[string]workspaces.Profile{"py": {Backend: "local", Options: json.RawMessage(`{"a":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := svc.CreateSpec("py", "", json.RawMessage("null")); err != nil || p.Backend != "local" || string(p.Options) != `{"a":1}` {
		t.Fatalf("py: %+v %v", p, err)
	}
	if p, err := svc.CreateSpec("", "docker", json.RawMessage(`{"b":2}`)); err != nil || p.Backend != "docker" || string(p.Options) != `{"b":2}` {
		t.Fatalf("no profile: %+v %v", p, err)
	}
	for _, c := range []struct{ profile, backend, options string }{{"nosuch", "", ""}, {"py", "local", ""}, {"py", "", `{}`}} {
		if _, err := svc.CreateSpec(c.profile, c.backend, json.RawMessage(c.options)); !errors.Is(err, opsapi.ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", c, err)
		}
	}
}
