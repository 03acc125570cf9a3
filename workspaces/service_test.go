package workspaces_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// unanswering is a backend whose engine does not answer.
type unanswering struct{ opsapi.Backend }

func (unanswering) Ping(context.Context) error {
	return opsapi.E("fake.Ping", "", opsapi.ErrUnavailable, errors.New("nobody answers"))
}

// notes collects what the service tells a request's record.
type notes struct {
	mu               sync.Mutex
	rule, reason, ws string
	exit             *int
}

func (n *notes) Deny(rule, reason string) {
	n.mu.Lock()
	n.rule, n.reason = rule, reason
	n.mu.Unlock()
}
func (n *notes) Workspace(id string)           { n.mu.Lock(); n.ws = id; n.mu.Unlock() }
func (n *notes) Args(string, string, []string) {}
func (n *notes) ExitCode(c int)                { n.mu.Lock(); n.exit = &c; n.mu.Unlock() }

func newService(t *testing.T, alice tenant.Config, pol *policy.Policy, extra map[string]opsapi.Backend) *workspaces.Service {
	t.Helper()
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	alice.Name, alice.TokenHashes = "alice", []string{tenant.HashToken("alice-token")}
	at, err := tenant.New(alice, pol)
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := tenant.New(tenant.Config{Name: "bob", TokenHashes: []string{tenant.HashToken("bob-token")}}, nil)
	reg, err := tenant.NewRegistry(at, bt)
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]opsapi.Backend{"local": b}
	for k, v := range extra {
		backends[k] = v
	}
	svc, err := workspaces.New(workspaces.Config{Backends: backends, DefaultBackend: "local", Tenants: reg}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	return svc
}

// TestReadyNamesTheBackendThatDoesNotAnswer: readiness is every
// pingable backend answering.
func TestReadyNamesTheBackendThatDoesNotAnswer(t *testing.T) {
	svc := newService(t, tenant.Config{}, nil, nil)
	if err := svc.Ready(t.Context()); err != nil {
		t.Fatalf("Ready with local only: %v", err)
	}
	svc = newService(t, tenant.Config{}, nil, map[string]opsapi.Backend{"engine": unanswering{}})
	err := svc.Ready(t.Context())
	if !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "backend engine is not ready") {
		t.Fatalf("Ready: %v", err)
	}
}

// TestConcurrencyLimit: past its concurrent calls a tenant gets a
// *LimitError carrying the wait; leaving frees the slot.
func TestConcurrencyLimit(t *testing.T) {
	svc := newService(t, tenant.Config{Quotas: tenant.Quotas{ConcurrentCalls: 1}}, nil, nil)
	alice := svc.Tenants().Lookup("alice")
	leave, err := svc.Enter(alice)
	if err != nil {
		t.Fatal(err)
	}
	var le *workspaces.LimitError
	if _, err := svc.Enter(alice); !errors.As(err, &le) || le.Rule != "concurrency" || le.RetryAfter <= 0 {
		t.Fatalf("second call: %v", err)
	}
	leave()
	if leave, err = svc.Enter(alice); err != nil {
		t.Fatalf("after leaving: %v", err)
	}
	leave()
}

// TestServiceWithoutHTTP: create, a denied raw operation, a tool call and
// another tenant's lookup, with what the request's record hears.
func TestServiceWithoutHTTP(t *testing.T) {
	pol, err := policy.Parse([]byte("paths:\n  read:\n    deny: [\"secret/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(t, tenant.Config{}, pol, nil)
	alice, bob := svc.Tenants().Lookup("alice"), svc.Tenants().Lookup("bob")
	n := &notes{}
	ctx := workspaces.WithRequest(t.Context(), workspaces.Request{ID: "r1", Notes: n})
	info, err := svc.Create(ctx, alice, "", nil, nil)
	if err != nil || info.Backend != "local" || n.ws != info.ID {
		t.Fatalf("Create: %+v %v (notes %+v)", info, err, n)
	}
	w, err := svc.Lookup(ctx, alice, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.Open(ctx, w, "secret/key")
	if !errors.Is(err, opsapi.ErrDenied) || n.rule != "paths.read" {
		t.Fatalf("Open secret/key: %v (notes %+v)", err, n)
	}
	if err.Error() != "read secret/key: Blocked by policy: reading secret/key matches deny rule \"secret/**\"" {
		t.Errorf("denial text %q", err)
	}
	res := mustRun(t, svc, ctx, w, 1, "bash", []byte(`{"command":"echo hi"}`))
	if res.IsError || !strings.Contains(res.Content[0].Text, "hi") {
		t.Fatalf("bash: %+v", res)
	}
	res = mustRun(t, svc, ctx, w, 2, "read", []byte(`{"path":"secret/key"}`))
	if !res.IsError || !strings.HasPrefix(res.Content[0].Text, "Blocked by policy: ") {
		t.Fatalf("read secret/key: %+v", res)
	}
	n2 := &notes{}
	ctx2 := workspaces.WithRequest(t.Context(), workspaces.Request{Notes: n2})
	if _, err := svc.Lookup(ctx2, bob, info.ID); !errors.Is(err, workspaces.ErrNotFound) || n2.rule != "tenant" {
		t.Fatalf("bob's lookup: %v (notes %+v)", err, n2)
	}
	if err := svc.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Lookup(ctx, alice, info.ID); !errors.Is(err, workspaces.ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
}

// bash's full output stays out of the workspace, a read reaches it even
// under a policy that allows reading only src/**, and Delete removes it.
func TestFullOutputOutsideTheWorkspace(t *testing.T) {
	pol, err := policy.Parse([]byte("paths:\n  read:\n    allow: [\"src/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	at, _ := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken("alice-token")}}, pol)
	reg, _ := tenant.NewRegistry(at)
	spill := t.TempDir()
	svc, err := workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": b}, DefaultBackend: "local",
		Tenants: reg, SpillDir: spill}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := workspaces.WithRequest(t.Context(), workspaces.Request{ID: "r1", Notes: &notes{}})
	info, err := svc.Create(ctx, svc.Tenants().Lookup("alice"), "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := svc.Lookup(ctx, svc.Tenants().Lookup("alice"), info.ID)
	res := mustRun(t, svc, ctx, w, 1, "bash", []byte(`{"command":"seq 3000"}`))
	m := regexp.MustCompile(`Full output: (/wsbroker-output/bash-[0-9a-f]{16}\.log)\]$`).FindStringSubmatch(res.Content[0].Text)
	if res.IsError || m == nil {
		t.Fatalf("bash: %+v", res)
	}
	if entries, _ := os.ReadDir(info.Root); len(entries) != 0 {
		t.Errorf("the workspace holds %v", entries)
	}
	res = mustRun(t, svc, ctx, w, 2, "read", []byte(`{"path":"`+m[1]+`","offset":3000}`))
	if res.IsError || res.Content[0].Text != "3000\n" {
		t.Fatalf("read of the full output: %+v", res)
	}
	if res = mustRun(t, svc, ctx, w, 3, "read", []byte(`{"path":"other.txt"}`)); !res.IsError {
		t.Fatalf("the policy did not apply: %+v", res)
	}
	if entries, _ := os.ReadDir(spill); len(entries) != 1 {
		t.Fatalf("spill dir holds %v", entries)
	}
	if err := svc.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(spill); len(entries) != 0 {
		t.Errorf("left after Delete: %v", entries)
	}
}
