package workspaces_test

import (
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// TestFullOutputCountsInTheDiskQuota: bash's full-output files, kept on
// the broker's host, count in the tenant's disk quota: a workspace whose
// own files are nothing but whose spilled output is past the quota may
// not write more, and deleting it frees the quota.
func TestFullOutputCountsInTheDiskQuota(t *testing.T) {
	b, err := local.New(local.Config{StateDir: t.TempDir(), Sandbox: local.SandboxConfig{Mode: "off"}}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	at, _ := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken("alice-token")},
		Quotas: tenant.Quotas{DiskBytes: 100_000}}, nil)
	reg, _ := tenant.NewRegistry(at)
	svc, err := workspaces.New(workspaces.Config{Backends: map[string]opsapi.Backend{"local": b}, DefaultBackend: "local",
		Tenants: reg, SpillDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := workspaces.WithRequest(t.Context(), workspaces.Request{ID: "r1", Notes: &notes{}})
	alice := svc.Tenants().Lookup("alice")
	info, err := svc.Create(ctx, alice, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := svc.Lookup(ctx, alice, info.ID)
	// seq 40000 prints 228,894 bytes: the full output is spilled, the
	// workspace itself stays empty.
	res := mustRun(t, svc, ctx, w, 1, "bash", []byte(`{"command":"seq 40000"}`))
	if res.IsError || !strings.Contains(res.Content[0].Text, "Full output: /wsbroker-output/") {
		t.Fatalf("bash: %+v", res)
	}
	res = mustRun(t, svc, ctx, w, 2, "write", []byte(`{"path":"a.txt","content":"a"}`))
	if !res.IsError || !strings.Contains(res.Content[0].Text, "disk quota exceeded") {
		t.Fatalf("a write with 228 KB spilled against a 100 KB quota: %+v", res)
	}
	if err := svc.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, alice, "", nil, nil); err != nil {
		t.Errorf("a create once the spilled output is gone: %v", err)
	}
}
