package tenant_test

import (
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/tenant"
)

func mustTenant(t *testing.T, c tenant.Config) *tenant.Tenant {
	t.Helper()
	tn, err := tenant.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

func TestAuthenticate(t *testing.T) {
	a := mustTenant(t, tenant.Config{Name: "a", TokenHashes: []string{tenant.HashToken("ta1"), strings.TrimPrefix(tenant.HashToken("ta2"), "sha256:")}})
	b := mustTenant(t, tenant.Config{Name: "b", TokenHashes: []string{tenant.HashToken("tb")}})
	reg, err := tenant.NewRegistry(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"ta1": "a", "ta2": "a", "tb": "b", "tc": "", "": "", "ta1 ": ""} {
		got := reg.Authenticate(tok)
		name := ""
		if got != nil {
			name = got.Name
		}
		if name != want {
			t.Errorf("Authenticate(%q) = %q, want %q", tok, name, want)
		}
	}
}

func TestRegistryRefusesMistakes(t *testing.T) {
	a := mustTenant(t, tenant.Config{Name: "a", TokenHashes: []string{tenant.HashToken("x")}})
	a2 := mustTenant(t, tenant.Config{Name: "a", TokenHashes: []string{tenant.HashToken("y")}})
	shared := mustTenant(t, tenant.Config{Name: "c", TokenHashes: []string{tenant.HashToken("x")}})
	if _, err := tenant.NewRegistry(a, a2); err == nil {
		t.Error("two tenants named a accepted")
	}
	if _, err := tenant.NewRegistry(a, shared); err == nil {
		t.Error("a token shared by two tenants accepted")
	}
	if _, err := tenant.NewRegistry(); err == nil {
		t.Error("an empty registry accepted")
	}
	for name, c := range map[string]tenant.Config{
		"no name":        {TokenHashes: []string{tenant.HashToken("x")}},
		"no token":       {Name: "n"},
		"plain token":    {Name: "n", TokenHashes: []string{"s3cret"}},
		"short hash":     {Name: "n", TokenHashes: []string{"sha256:abcd"}},
		"negative quota": {Name: "n", TokenHashes: []string{tenant.HashToken("x")}, Quotas: tenant.Quotas{Workspaces: -2}},
		"negative rate":  {Name: "n", TokenHashes: []string{tenant.HashToken("x")}, Quotas: tenant.Quotas{RequestsPerSecond: -1}},
		"bad image glob": {Name: "n", TokenHashes: []string{tenant.HashToken("x")}, Images: []string{"[a"}},
	} {
		if _, err := tenant.New(c, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAllowsBackendAndImage(t *testing.T) {
	tn := mustTenant(t, tenant.Config{Name: "a", TokenHashes: []string{tenant.HashToken("x")},
		Backends: []string{"docker"}, Images: []string{"wsbroker/*"}})
	if tn.AllowsBackend("local") || !tn.AllowsBackend("docker") {
		t.Error("backends")
	}
	if !tn.AllowsImage("wsbroker/workspace:current") || tn.AllowsImage("evil/image") || !tn.AllowsImage("") {
		t.Error("images")
	}
	open := mustTenant(t, tenant.Config{Name: "b", TokenHashes: []string{tenant.HashToken("y")}})
	if !open.AllowsBackend("ssh") || !open.AllowsImage("anything") {
		t.Error("no lists must allow all")
	}
}

func TestWorkspaceLimitDefault(t *testing.T) {
	for q, want := range map[int]int{0: tenant.DefaultWorkspaces, -1: 0, 3: 3} {
		if got := (tenant.Quotas{Workspaces: q}).WorkspaceLimit(); got != want {
			t.Errorf("workspaces %d: limit %d, want %d", q, got, want)
		}
	}
	if _, err := tenant.New(tenant.Config{Name: "n", TokenHashes: []string{tenant.HashToken("x")},
		Quotas: tenant.Quotas{Workspaces: -1}}, nil); err != nil {
		t.Errorf("workspaces -1 (no limit) refused: %v", err)
	}
}
