package workspaces_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// fakeBackend is an in-memory backend for the service's admission: its
// workspaces hold no files, only a disk figure the test sets. With hold
// set, the next Create says so on entered and waits until gate closes,
// so a test can keep a create under way.
type fakeBackend struct {
	name    string
	hold    atomic.Bool
	gate    chan struct{}
	entered chan struct{}
	used    atomic.Int64 // what each workspace measures (DiskMeasurer)
	creates atomic.Int32
}

func (b *fakeBackend) Name() string { return b.name }
func (b *fakeBackend) Close() error { return nil }

func (b *fakeBackend) Create(ctx context.Context, spec opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	if b.hold.CompareAndSwap(true, false) {
		b.entered <- struct{}{}
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.creates.Add(1)
	return &fakeWorkspace{root: "/fake/" + spec.ID, used: &b.used}, nil
}

// sizedBackend gives each workspace a filesystem of its own of size
// bytes (opsapi.DiskSizer), which its workspaces report (DiskLimiter).
type sizedBackend struct {
	fakeBackend
	size int64
}

func (b *sizedBackend) DiskLimit(json.RawMessage) int64 { return b.size }

func (b *sizedBackend) Create(ctx context.Context, spec opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	ws, err := b.fakeBackend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &sizedWorkspace{fakeWorkspace: ws.(*fakeWorkspace), size: b.size}, nil
}

type fakeWorkspace struct {
	root      string
	used      *atomic.Int64
	destroyed atomic.Bool
}

func (w *fakeWorkspace) Root() string                             { return w.root }
func (w *fakeWorkspace) DiskUsage(context.Context) (int64, error) { return w.used.Load(), nil }
func (w *fakeWorkspace) Destroy(context.Context) error            { w.destroyed.Store(true); return nil }

type sizedWorkspace struct {
	*fakeWorkspace
	size int64
}

func (w *sizedWorkspace) Disk() (opsapi.Disk, error) { return opsapi.Disk{LimitBytes: w.size}, nil }

// fakeService is a service over backends with tenants alice (as given,
// with pol) and bob (no limits).
func fakeService(t *testing.T, alice tenant.Config, pol *policy.Policy, backends map[string]opsapi.Backend) *workspaces.Service {
	t.Helper()
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
	def := ""
	for name := range backends {
		if def == "" || name < def {
			def = name
		}
	}
	svc, err := workspaces.New(workspaces.Config{Backends: backends, DefaultBackend: def, Tenants: reg}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	return svc
}

// TestCreateAdmission: a create is refused, before the backend is asked,
// for an unknown backend (ErrInvalid), a backend or image the tenant may
// not use, or a network its policy denies (ErrDenied, rule "tenant" in
// the request's record); and, once the service shuts down, as
// ErrUnavailable.
func TestCreateAdmission(t *testing.T) {
	pol, err := policy.Parse([]byte("network:\n  allow: [\"none\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	fake, other := &fakeBackend{name: "fake"}, &fakeBackend{name: "other"}
	svc := fakeService(t, tenant.Config{Backends: []string{"fake"}, Images: []string{"ok/*"}}, nil,
		map[string]opsapi.Backend{"fake": fake, "other": other})
	alice, bob := svc.Tenants().Lookup("alice"), svc.Tenants().Lookup("bob")
	for _, c := range []struct {
		backend, options, want string
		kind                   error
	}{
		{"nope", "", `unknown backend "nope"`, opsapi.ErrInvalid},
		{"other", "", "tenant alice may not use the other backend", opsapi.ErrDenied},
		{"fake", `{"image":"bad/x"}`, `tenant alice may not use the image "bad/x"`, opsapi.ErrDenied},
	} {
		n := &notes{}
		ctx := workspaces.WithRequest(t.Context(), workspaces.Request{Notes: n})
		_, err := svc.Create(ctx, alice, c.backend, json.RawMessage(c.options), nil)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create on %s %s: %v, want %v saying %q", c.backend, c.options, err, c.kind, c.want)
		}
		if c.kind == opsapi.ErrDenied && n.rule != "tenant" {
			t.Errorf("create on %s %s: the record heard rule %q", c.backend, c.options, n.rule)
		}
	}
	if fake.creates.Load()+other.creates.Load() != 0 {
		t.Fatal("a refused create reached the backend")
	}
	if _, err := svc.Create(t.Context(), alice, "", json.RawMessage(`{"image":"ok/1"}`), nil); err != nil {
		t.Fatalf("an allowed create: %v", err)
	}
	if _, err := svc.Create(t.Context(), bob, "other", nil, nil); err != nil {
		t.Fatalf("bob, with no limits, on other: %v", err)
	}

	// The policy's network rule: a backend without NetworkChooser runs
	// on the host's network.
	svc = fakeService(t, tenant.Config{}, pol, map[string]opsapi.Backend{"fake": &fakeBackend{name: "fake"}})
	_, err = svc.Create(t.Context(), svc.Tenants().Lookup("alice"), "", nil, nil)
	if !errors.Is(err, opsapi.ErrDenied) || !strings.Contains(err.Error(), `"host"`) {
		t.Fatalf("create on the host's network under allow [none]: %v", err)
	}
	if _, err := svc.Create(t.Context(), svc.Tenants().Lookup("bob"), "", nil, nil); err != nil {
		t.Fatalf("bob has no policy: %v", err)
	}
	if err := svc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(t.Context(), svc.Tenants().Lookup("bob"), "", nil, nil); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("create after Shutdown: %v", err)
	}
}

// TestWorkspaceQuotaCountsCreatesUnderWay: a tenant's workspace quota
// counts its workspaces and its creates still running, so parallel
// creates cannot pass it together; it is the tenant's own (bob is not
// held to alice's), and a Delete gives the slot back.
func TestWorkspaceQuotaCountsCreatesUnderWay(t *testing.T) {
	fake := &fakeBackend{name: "fake", gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	fake.hold.Store(true)
	svc := fakeService(t, tenant.Config{Quotas: tenant.Quotas{Workspaces: 2}}, nil, map[string]opsapi.Backend{"fake": fake})
	alice, bob := svc.Tenants().Lookup("alice"), svc.Tenants().Lookup("bob")
	var wg sync.WaitGroup
	var first workspaces.Info
	wg.Go(func() {
		var err error
		if first, err = svc.Create(t.Context(), alice, "", nil, nil); err != nil {
			t.Errorf("the create under way: %v", err)
		}
	})
	<-fake.entered
	second, err := svc.Create(t.Context(), alice, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &notes{}
	ctx := workspaces.WithRequest(t.Context(), workspaces.Request{Notes: n})
	_, err = svc.Create(ctx, alice, "", nil, nil)
	if !errors.Is(err, opsapi.ErrDenied) || !strings.Contains(err.Error(), "tenant alice holds 2 of 2 workspaces") || n.rule != "quota" {
		t.Fatalf("a third create while one is under way: %v (rule %q)", err, n.rule)
	}
	if _, err := svc.Create(t.Context(), bob, "", nil, nil); err != nil {
		t.Fatalf("bob is held to alice's quota: %v", err)
	}
	close(fake.gate)
	wg.Wait()
	if got := len(svc.List(alice)); got != 2 {
		t.Fatalf("alice lists %d workspaces, want 2", got)
	}
	if _, err := svc.Create(t.Context(), alice, "", nil, nil); !errors.Is(err, opsapi.ErrDenied) {
		t.Fatalf("a third create with two made: %v", err)
	}
	w, err := svc.Lookup(t.Context(), alice, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(t.Context(), alice, "", nil, nil); err != nil {
		t.Fatalf("a create after a Delete: %v", err)
	}
	if _, err := svc.Lookup(t.Context(), alice, first.ID); err != nil {
		t.Fatalf("the create that was under way: %v", err)
	}
}

// TestOwnerCheck: a tenant finds, lists and deletes only its own
// workspaces; another's is ErrNotFound like an unknown one, and the
// request's record hears rule "tenant".
func TestOwnerCheck(t *testing.T) {
	svc := fakeService(t, tenant.Config{}, nil, map[string]opsapi.Backend{"fake": &fakeBackend{name: "fake"}})
	alice, bob := svc.Tenants().Lookup("alice"), svc.Tenants().Lookup("bob")
	info, err := svc.Create(t.Context(), alice, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &notes{}
	ctx := workspaces.WithRequest(t.Context(), workspaces.Request{Notes: n})
	if _, err := svc.Lookup(ctx, bob, info.ID); !errors.Is(err, workspaces.ErrNotFound) || n.rule != "tenant" {
		t.Fatalf("bob's lookup of alice's workspace: %v (rule %q)", err, n.rule)
	}
	if _, err := svc.Lookup(t.Context(), bob, "ws_unknown"); !errors.Is(err, workspaces.ErrNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	if got := svc.List(bob); len(got) != 0 {
		t.Fatalf("bob lists %+v", got)
	}
	if got := svc.List(alice); len(got) != 1 || got[0].ID != info.ID {
		t.Fatalf("alice lists %+v", got)
	}
}

// TestDiskQuota: a tenant's DiskBytes is kept as the service measures
// it: a create of a workspace with a filesystem of its own must fit its
// size beside what the tenant holds and other creates reserved (the
// denial says what size would fit); one without is admitted while the
// tenant is under quota; and a call that writes into a measured
// workspace is denied (rule "quota") once the tenant's workspaces hold
// the quota, while a read is not.
func TestDiskQuota(t *testing.T) {
	sized := &sizedBackend{fakeBackend: fakeBackend{name: "sized"}, size: 400}
	measured := &fakeBackend{name: "measured"}
	svc := fakeService(t, tenant.Config{Quotas: tenant.Quotas{DiskBytes: 1000}}, nil,
		map[string]opsapi.Backend{"sized": sized, "measured": measured})
	alice := svc.Tenants().Lookup("alice")
	for range 2 {
		if _, err := svc.Create(t.Context(), alice, "sized", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err := svc.Create(t.Context(), alice, "sized", nil, nil)
	if !errors.Is(err, opsapi.ErrDenied) || !strings.Contains(err.Error(), "holds 800 of 1000 bytes") ||
		!strings.Contains(err.Error(), "at most 200 bytes") {
		t.Fatalf("a third 400-byte workspace: %v", err)
	}
	measured.used.Store(100)
	info, err := svc.Create(t.Context(), alice, "measured", nil, nil)
	if err != nil {
		t.Fatalf("a measured workspace while under quota: %v", err)
	}
	w, err := svc.Lookup(t.Context(), alice, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 800 + 100: under the quota, the write is admitted and reaches a
	// workspace that cannot write.
	if err := svc.Mkdir(t.Context(), w, "d"); !errors.Is(err, workspaces.ErrNotFound) {
		t.Fatalf("mkdir under quota: %v", err)
	}
	measured.used.Store(250)
	time.Sleep(2100 * time.Millisecond) // the measured figure stands 2 s
	n := &notes{}
	ctx := workspaces.WithRequest(t.Context(), workspaces.Request{Notes: n})
	err = svc.Mkdir(ctx, w, "d")
	if !errors.Is(err, opsapi.ErrDenied) || !strings.Contains(err.Error(), "disk quota exceeded: tenant alice uses 1050 of 1000 bytes") || n.rule != "quota" {
		t.Fatalf("mkdir over quota: %v (rule %q)", err, n.rule)
	}
	if _, _, err := svc.ReadDir(t.Context(), w, "."); errors.Is(err, opsapi.ErrDenied) {
		t.Fatalf("a read over the disk quota: %v", err)
	}
	if _, err := svc.Create(t.Context(), alice, "measured", nil, nil); !errors.Is(err, opsapi.ErrDenied) {
		t.Fatalf("a create over the disk quota: %v", err)
	}
}

// TestTenantCallLimits: a tenant's request rate refuses the call past its
// burst with the wait (and a batch's extra calls are charged against the
// same budget); its concurrent calls bound a batch's extra slots to those
// free; another tenant is held to neither.
func TestTenantCallLimits(t *testing.T) {
	svc := fakeService(t, tenant.Config{Quotas: tenant.Quotas{RequestsPerSecond: 0.01, Burst: 2, ConcurrentCalls: 3}}, nil,
		map[string]opsapi.Backend{"fake": &fakeBackend{name: "fake"}})
	alice, bob := svc.Tenants().Lookup("alice"), svc.Tenants().Lookup("bob")
	leave, err := svc.Enter(alice)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.ChargeCall(alice); err != nil {
		t.Fatalf("a batch's second call within the burst: %v", err)
	}
	var le *workspaces.LimitError
	if err := svc.ChargeCall(alice); !errors.As(err, &le) || le.Rule != "rate" || le.RetryAfter < time.Minute {
		t.Fatalf("a call past the burst: %v", err)
	}
	if _, err := svc.Enter(alice); !errors.As(err, &le) || le.Rule != "rate" {
		t.Fatalf("a request past the burst: %v", err)
	}
	// One call in flight of 3: a batch of 4 more gets 2 extra slots.
	extra, leaveBatch := svc.EnterBatch(alice, 4)
	if extra != 2 {
		t.Fatalf("EnterBatch: %d extra slots with 1 of 3 in flight, want 2", extra)
	}
	if more, _ := svc.EnterBatch(alice, 4); more != 0 {
		t.Fatalf("EnterBatch with every slot taken: %d", more)
	}
	leaveBatch()
	leave()
	if more, done := svc.EnterBatch(alice, 4); more != 3 {
		t.Fatalf("EnterBatch with the slots given back: %d, want 3", more)
	} else {
		done()
	}
	for range 5 {
		l, err := svc.Enter(bob)
		if err != nil {
			t.Fatalf("bob is held to alice's limits: %v", err)
		}
		l()
	}
	if more, _ := svc.EnterBatch(bob, 10); more != 10 {
		t.Fatalf("bob, without a concurrency limit, gets %d of 10 slots", more)
	}
}
