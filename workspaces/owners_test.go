package workspaces_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// relisted is a backend whose List returns what it was given, as an engine
// would after a restart.
type relisted struct {
	opsapi.Backend
	found map[string]opsapi.Workspace
}

func (r relisted) List(context.Context) (map[string]opsapi.Workspace, error) { return r.found, nil }

// labelled is a workspace whose engine holds its owner. It does not
// unwrap: opsapi.As finds the owner on it.
type labelled struct {
	opsapi.Workspace
	owner string
}

func (l labelled) Owner() string { return l.owner }

// ownersRegistry has alice, bob and root (an admin).
func ownersRegistry(t *testing.T) *tenant.Registry {
	t.Helper()
	var ts []*tenant.Tenant
	for _, c := range []tenant.Config{
		{Name: "alice", TokenHashes: []string{tenant.HashToken("alice-token")}},
		{Name: "bob", TokenHashes: []string{tenant.HashToken("bob-token")}},
		{Name: "root", Admin: true, TokenHashes: []string{tenant.HashToken("root-token")}},
	} {
		tt, err := tenant.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tt)
	}
	reg, err := tenant.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func localBackend(t *testing.T) *local.Backend {
	t.Helper()
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestRediscoveredOwners: with no owners file, a rediscovered workspace
// belongs to the owner its engine holds; one whose owner is unknown goes
// to no tenant (it used to go to the first tenant listed): only an admin
// sees it, may not use it, and may delete it.
func TestRediscoveredOwners(t *testing.T) {
	b := localBackend(t)
	mk := func(id string) opsapi.Workspace {
		ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	found := map[string]opsapi.Workspace{
		"ws_bobslabelledworkspace00": labelled{mk("ws_bobslabelledworkspace00"), "bob"},
		"ws_unknownownerworkspace00": mk("ws_unknownownerworkspace00"),
	}
	reg := ownersRegistry(t)
	svc, err := workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": relisted{b, found}},
		DefaultBackend: "local", Tenants: reg}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	alice, bob, root := reg.Lookup("alice"), reg.Lookup("bob"), reg.Lookup("root")

	if _, err := svc.Lookup(t.Context(), bob, "ws_bobslabelledworkspace00"); err != nil {
		t.Errorf("bob's labelled workspace: %v", err)
	}
	for _, tt := range []*tenant.Tenant{alice, bob} {
		if _, err := svc.Lookup(t.Context(), tt, "ws_unknownownerworkspace00"); !errors.Is(err, workspaces.ErrNotFound) {
			t.Errorf("%s reached the workspace of unknown owner: %v", tt.Name, err)
		}
	}
	if got := svc.List(alice); len(got) != 0 {
		t.Errorf("alice lists %+v", got)
	}
	if got := svc.List(root); len(got) != 1 || got[0].ID != "ws_unknownownerworkspace00" {
		t.Fatalf("the admin lists %+v, want only the workspace of unknown owner", got)
	}
	w, err := svc.Lookup(t.Context(), root, "ws_unknownownerworkspace00")
	if err != nil {
		t.Fatal(err)
	}
	if res := mustRun(t, svc, t.Context(), w, 1, "ls", []byte(`{}`)); !res.IsError {
		t.Errorf("the admin used a workspace of unknown owner: %+v", res)
	}
	if err := svc.Delete(t.Context(), w); err != nil {
		t.Fatalf("the admin could not delete it: %v", err)
	}
	if _, err := os.Stat(found["ws_unknownownerworkspace00"].Root()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its directory is still there: %v", err)
	}
}

// TestCreateFailsWhenTheOwnerCannotBeRecorded: a workspace whose owner is
// not on disk could go to another tenant after a restart, so the create
// fails and leaves nothing behind (it used to succeed, logging an error).
func TestCreateFailsWhenTheOwnerCannotBeRecorded(t *testing.T) {
	b := localBackend(t)
	state := t.TempDir()
	reg := ownersRegistry(t)
	svc, err := workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": b}, DefaultBackend: "local",
		Tenants: reg, OwnersFile: filepath.Join(state, "owners", "owners.json")}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	alice := reg.Lookup("alice")
	kept, err := svc.Create(t.Context(), alice, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The owners file's directory becomes a file: every save fails, even
	// as root.
	if err := os.RemoveAll(filepath.Join(state, "owners")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "owners"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	entries := func() []os.DirEntry {
		es, _ := os.ReadDir(filepath.Dir(kept.Root))
		return es
	}
	before := len(entries())
	info, err := svc.Create(t.Context(), alice, "", nil, nil)
	if !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("Create with an unwritable owners file: %+v, %v; want ErrUnavailable", info, err)
	}
	if got := svc.List(alice); len(got) != 1 || got[0].ID != kept.ID {
		t.Errorf("alice lists %+v, want only %s", got, kept.ID)
	}
	if after := len(entries()); after != before {
		t.Errorf("%d workspace directories before the failed create, %d after", before, after)
	}
}

// vanishing is a local workspace whose sandbox can vanish, as a docker
// container removed with the engine's own tools does.
type vanishing struct {
	*local.Workspace
	why string
}

func (v *vanishing) Gone() string { return v.why }

// TestGoneWorkspace: a workspace whose sandbox vanished says so in its
// info; raw operations answer ErrNotFound saying why, tool calls an error
// result saying the same; delete still works.
func TestGoneWorkspace(t *testing.T) {
	b := localBackend(t)
	const id = "ws_vanishingworkspace00000"
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	v := &vanishing{Workspace: ws.(*local.Workspace)}
	reg := ownersRegistry(t)
	svc, err := workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": relisted{b, map[string]opsapi.Workspace{id: labelledOps{v, "alice"}}}},
		DefaultBackend: "local", Tenants: reg}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	w, err := svc.Lookup(t.Context(), reg.Lookup("alice"), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.ReadDir(t.Context(), w, "."); err != nil || w.Info().Gone != "" {
		t.Fatalf("before it vanished: %v, gone %q", err, w.Info().Gone)
	}
	v.why = "its container was removed outside the broker"
	if got := w.Info().Gone; got != v.why {
		t.Errorf("info says gone %q, want %q", got, v.why)
	}
	_, _, err = svc.ReadDir(t.Context(), w, ".")
	want := "workspace " + id + " is gone (its container was removed outside the broker); it can only be deleted"
	if !errors.Is(err, workspaces.ErrNotFound) || err.Error() != want {
		t.Errorf("ReadDir: %v, want ErrNotFound %q", err, want)
	}
	if res := mustRun(t, svc, t.Context(), w, 1, "ls", []byte(`{}`)); !res.IsError || res.Content[0].Text != want {
		t.Errorf("ls: %+v, want the error %q", res, want)
	}
	if err := svc.Delete(t.Context(), w); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// labelledOps is a full workspace whose engine holds its owner.
type labelledOps struct {
	*vanishing
	owner string
}

func (l labelledOps) Owner() string { return l.owner }
