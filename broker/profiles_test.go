//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

func withProfiles(c *broker.Config) {
	c.Profiles = map[string]workspaces.Profile{
		"plain": {Backend: "local"},
		"bad":   {Backend: "local", Options: json.RawMessage(`{"unknownOption":1}`)},
		"gone":  {Backend: "nope"},
	}
}

// TestCreateWithProfile: POST /v1/workspaces {"profile": NAME} creates
// the workspace the profile describes; an unknown profile, or a profile
// with a backend or options, is a 400 naming it; what a profile resolves
// to goes through the backend's own validation.
func TestCreateWithProfile(t *testing.T) {
	e := newEnv(t, withProfiles)
	resp, data := e.do("POST", "/v1/workspaces", map[string]any{"profile": "plain"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	var ws wire.WorkspaceInfo
	if err := json.Unmarshal(data, &ws); err != nil || ws.Backend != "local" || !idPattern.MatchString(ws.ID) {
		t.Fatalf("workspace %+v %v", ws, err)
	}
	cases := []struct {
		name, body, code, detail string
	}{
		{"unknown", `{"profile":"nosuch"}`, "invalid", `no profile "nosuch" is configured`},
		{"with backend", `{"profile":"plain","backend":"local"}`, "invalid", `profile "plain" was given with a backend or options`},
		{"with options", `{"profile":"plain","options":{"image":"x"}}`, "invalid", `profile "plain" was given with a backend or options`},
		{"options invalid", `{"profile":"bad"}`, "invalid", "unknownOption"},
		{"backend unknown", `{"profile":"gone"}`, "invalid", `unknown backend "nope"`},
	}
	for _, c := range cases {
		p := e.problem(http.StatusBadRequest, c.code, "POST", "/v1/workspaces", c.body)
		if !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%s: detail %q, want %q", c.name, p.Detail, c.detail)
		}
	}
	var list wire.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 {
		t.Fatalf("refused creates left workspaces: %+v", list)
	}
}

// TestCreateWithProfileIsAdmitted: the tenant's backends and quota apply
// to what the profile resolves to, as to any create.
func TestCreateWithProfileIsAdmitted(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) { c.Backends = []string{"docker"} }, nil, withProfiles)
	resp, data := tc.as(aliceToken, "POST", "/v1/workspaces", map[string]any{"profile": "plain"})
	p := checkProblem(t, resp, data, http.StatusForbidden, "denied")
	if !strings.Contains(p.Detail, "local") {
		t.Errorf("detail %q does not name the backend", p.Detail)
	}
	if resp, data := tc.as(bobToken, "POST", "/v1/workspaces", map[string]any{"profile": "plain"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("bob may use local: %d %s", resp.StatusCode, data)
	}

	quota := newTenancy(t, func(c *tenant.Config) { c.Quotas.Workspaces = 1 }, nil, withProfiles)
	quota.createAs(aliceToken)
	resp, data = quota.as(aliceToken, "POST", "/v1/workspaces", map[string]any{"profile": "plain"})
	checkProblem(t, resp, data, http.StatusForbidden, "denied")
}
