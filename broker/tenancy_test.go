//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789"
	adminToken = "admin-token-0123456789"
)

// tenancy is a broker with three tenants and an audit file.
type tenancy struct {
	*env
	auditPath string
}

func newTenancy(t *testing.T, alice func(*tenant.Config), alicePolicy *policy.Policy, mod func(*broker.Config)) *tenancy {
	t.Helper()
	ac := tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken(aliceToken)}}
	if alice != nil {
		alice(&ac)
	}
	at, err := tenant.New(ac, alicePolicy)
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := tenant.New(tenant.Config{Name: "bob", TokenHashes: []string{tenant.HashToken(bobToken)}}, nil)
	admin, _ := tenant.New(tenant.Config{Name: "ops", Admin: true, TokenHashes: []string{tenant.HashToken(adminToken)}}, nil)
	reg, err := tenant.NewRegistry(at, bt, admin)
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(auditPath, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	e := newEnv(t, func(c *broker.Config) {
		c.Tokens = nil
		c.Tenants = reg
		c.Audit = log
		if mod != nil {
			mod(c)
		}
	})
	return &tenancy{env: e, auditPath: auditPath}
}

// as sends a request with token; body as for env.request.
func (e *env) as(token, method, path string, body any, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	req := e.request(method, path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp := e.send(req)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("reading %s %s: %v", method, path, err)
	}
	return resp, data
}

func (e *env) createAs(token string) wire.WorkspaceInfo {
	e.t.Helper()
	resp, data := e.as(token, "POST", "/v1/workspaces", map[string]any{})
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	var ws wire.WorkspaceInfo
	if err := json.Unmarshal(data, &ws); err != nil {
		e.t.Fatal(err)
	}
	return ws
}

// records returns the audit file's events.
func (tc *tenancy) records() []audit.Event {
	tc.t.Helper()
	b, err := os.ReadFile(tc.auditPath)
	if err != nil {
		tc.t.Fatal(err)
	}
	var out []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			tc.t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// routeCases lists every route of the router, so a route added later is
// in the matrix without anyone remembering to add it.
func routeCases(t *testing.T, h http.Handler) [][2]string {
	t.Helper()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("the handler %T is not a chi router", h)
	}
	var out [][2]string
	_ = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, [2]string{method, broker.NormalizeRoute(route)})
		return nil
	})
	return out
}

var paramRE = regexp.MustCompile(`\{[a-z]+\}`)

// fill puts id in {id} and a plausible value in any other parameter.
func fill(route, id string) string {
	return paramRE.ReplaceAllStringFunc(route, func(p string) string {
		switch p {
		case "{id}":
			return id
		case "{name}":
			return "read"
		}
		return "x1"
	})
}

// TestTenantIsolationMatrix: every route under a workspace, asked with
// another tenant's token (plain and streaming), answers exactly what a
// missing workspace answers, touches nothing, and is audited as a denial.
func TestTenantIsolationMatrix(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	ws := tc.createAs(aliceToken)
	writeHost(t, ws, "keep.txt", "alice's\n")
	// Alice's background process: bob names it by its real id.
	var proc wire.BackgroundProcess
	if resp, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/processes", map[string]any{"command": "sleep 600", "stdin": true}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("alice's background process: %d %s", resp.StatusCode, data)
	} else if err := json.Unmarshal(data, &proc); err != nil {
		t.Fatal(err)
	}
	fill := func(route, id string) string { return fill(strings.ReplaceAll(route, "{proc}", proc.ID), id) }
	const missing = "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	bodies := map[string]any{
		"/v1/workspaces/{id}/processes":               map[string]any{"command": "echo bob > keep.txt"},
		"/v1/workspaces/{id}/processes/{proc}/signal": map[string]any{"signal": "SIGKILL"},
		"/v1/workspaces/{id}/processes/{proc}/stdin":  "bob's input",
		"/v1/workspaces/{id}/tools":                   map[string]any{"calls": []any{map[string]any{"name": "write", "arguments": map[string]any{"path": "keep.txt", "content": "bob"}}}},
		"/v1/workspaces/{id}/tools/{name}":            map[string]any{"path": "keep.txt"},
		"/v1/workspaces/{id}/exec":                    map[string]any{"command": "echo bob > keep.txt"},
		"/v1/workspaces/{id}/glob":                    map[string]any{"pattern": "*", "cwd": "."},
		"/v1/workspaces/{id}/search":                  map[string]any{"pattern": "a", "path": "."},
		"/v1/workspaces/{id}/files":                   "bob was here",
	}
	n := 0
	for _, rc := range routeCases(t, tc.srv.Handler()) {
		method, route := rc[0], rc[1]
		if !strings.Contains(route, "{id}") {
			continue
		}
		for _, accept := range []string{"", "application/x-ndjson"} {
			n++
			body := bodies[route]
			q := "?path=keep.txt"
			other, otherBody := tc.as(bobToken, method, fill(route, ws.ID)+q, body, "Accept", accept)
			none, noneBody := tc.as(bobToken, method, fill(route, missing)+q, body, "Accept", accept)
			if other.StatusCode != http.StatusNotFound || none.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s (Accept %q): another tenant's workspace %d %s, a missing one %d %s",
					method, route, accept, other.StatusCode, otherBody, none.StatusCode, noneBody)
				continue
			}
			if got, want := strings.ReplaceAll(string(otherBody), ws.ID, "ID"), strings.ReplaceAll(string(noneBody), missing, "ID"); got != want {
				t.Errorf("%s %s: bodies differ:\nforeign: %s\nmissing: %s", method, route, got, want)
			}
			for _, h := range []string{"Content-Type", "Allow", "Retry-After", "WWW-Authenticate"} {
				if other.Header.Get(h) != none.Header.Get(h) {
					t.Errorf("%s %s: header %s differs: %q vs %q", method, route, h, other.Header.Get(h), none.Header.Get(h))
				}
			}
		}
	}
	if n < 2*12 {
		t.Fatalf("only %d workspace route cases; the walk missed routes", n)
	}
	if got := readHost(t, ws, "keep.txt"); got != "alice's\n" {
		t.Fatalf("alice's file became %q", got)
	}
	var list wire.WorkspaceList
	_, data := tc.as(bobToken, "GET", "/v1/workspaces", nil)
	_ = json.Unmarshal(data, &list)
	if len(list.Workspaces) != 0 {
		t.Fatalf("bob lists %v", list.Workspaces)
	}
	if resp, data := tc.as(aliceToken, "GET", "/v1/workspaces/"+ws.ID, nil); resp.StatusCode != 200 {
		t.Fatalf("alice lost her workspace: %d %s", resp.StatusCode, data)
	}
	var after wire.BackgroundProcess
	if resp, data := tc.as(aliceToken, "GET", "/v1/workspaces/"+ws.ID+"/processes/"+proc.ID, nil); resp.StatusCode != 200 {
		t.Fatalf("alice lost her process: %d %s", resp.StatusCode, data)
	} else if err := json.Unmarshal(data, &after); err != nil || after.State != "running" || !after.Stdin || after.Output.Written != 0 {
		t.Fatalf("bob reached alice's process: %+v, %v", after, err)
	}
	denials := 0
	for _, ev := range tc.records() {
		if ev.Tenant == "bob" && ev.Workspace == ws.ID && ev.Decision == "deny" && ev.Rule == "tenant" {
			denials++
		}
		if ev.Tenant == "bob" && ev.Workspace == ws.ID && ev.Decision != "deny" {
			t.Errorf("a foreign request was recorded as allowed: %+v", ev)
		}
	}
	if denials != n {
		t.Fatalf("%d denials audited, want %d", denials, n)
	}
	_, metrics := tc.as(bobToken, "GET", "/metrics", nil)
	if want := fmt.Sprintf(`wsbroker_denials_total{rule="tenant"} %d`, n); !strings.Contains(string(metrics), want) {
		t.Fatalf("metrics lack %q", want)
	}
}

// TestTokenRotationWithoutRestart swaps the registry: the old token stops
// at once and the new one reaches the same workspaces.
func TestTokenRotationWithoutRestart(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	ws := tc.createAs(aliceToken)
	const newToken = "alice-rotated-token-98765"
	at, err := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken(newToken)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bt := tc.srv.Tenants().Lookup("bob")
	reg, err := tenant.NewRegistry(at, bt)
	if err != nil {
		t.Fatal(err)
	}
	tc.srv.SetTenants(reg)
	if resp, _ := tc.as(aliceToken, "GET", "/v1/workspaces/"+ws.ID, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("old token: %d, want 401", resp.StatusCode)
	}
	if resp, data := tc.as(newToken, "GET", "/v1/workspaces/"+ws.ID, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("new token: %d %s", resp.StatusCode, data)
	}
	if resp, _ := tc.as(adminToken, "GET", "/v1/workspaces", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("removed tenant's token: %d, want 401", resp.StatusCode)
	}
}

// TestRateLimit429: alice's tiny rate runs out; bob is unaffected.
func TestRateLimit429(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) { c.Quotas.RequestsPerSecond = 0.01; c.Quotas.Burst = 2 }, nil, nil)
	for range 2 {
		if resp, data := tc.as(aliceToken, "GET", "/v1/workspaces", nil); resp.StatusCode != 200 {
			t.Fatalf("within burst: %d %s", resp.StatusCode, data)
		}
	}
	resp, data := tc.as(aliceToken, "GET", "/v1/workspaces", nil)
	checkProblem(t, resp, data, http.StatusTooManyRequests, "too_many_requests")
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
	for range 5 {
		if resp, data := tc.as(bobToken, "GET", "/v1/workspaces", nil); resp.StatusCode != 200 {
			t.Fatalf("bob throttled: %d %s", resp.StatusCode, data)
		}
	}
	found := false
	for _, ev := range tc.records() {
		found = found || (ev.Tenant == "alice" && ev.Rule == "rate" && ev.Result.Status == 429)
	}
	if !found {
		t.Fatal("the 429 was not audited")
	}
}

// TestConcurrency429: with one call in flight alice's next call is 429;
// bob's goes through; once the first ends alice can call again.
func TestConcurrency429(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) { c.Quotas.ConcurrentCalls = 1 }, nil, nil)
	ws := tc.createAs(aliceToken)
	req := tc.request("POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": "echo started; sleep 30"})
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp := tc.send(req)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, `"output"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
	r2, data := tc.as(aliceToken, "GET", "/v1/workspaces", nil)
	checkProblem(t, r2, data, http.StatusTooManyRequests, "too_many_requests")
	if r2.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if r3, data := tc.as(bobToken, "GET", "/v1/workspaces", nil); r3.StatusCode != 200 {
		t.Fatalf("bob: %d %s", r3.StatusCode, data)
	}
	resp.Body.Close() // the client leaves; the command is killed and the slot freed
	deadline := time.Now().Add(20 * time.Second)
	for {
		r4, _ := tc.as(aliceToken, "GET", "/v1/workspaces", nil)
		if r4.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice still refused after her call ended: %d", r4.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawRequest writes raw bytes on a fresh connection and returns up to n
// responses, fewer when the server closes the connection first.
func rawRequest(t *testing.T, addr, raw string, n int) []*http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	var out []*http.Response
	for len(out) < n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp)
		if resp.Close {
			return out
		}
	}
	return out
}

// TestAuthorizationBypassAttempts: a body hidden behind Content-Length 0,
// a chunked body and an oversized body neither reach another tenant's
// workspace nor tell it apart from a missing one.
func TestAuthorizationBypassAttempts(t *testing.T) {
	tc := newTenancy(t, nil, nil, func(c *broker.Config) { c.MaxToolBody = 1024 })
	ws := tc.createAs(aliceToken)
	addr := strings.TrimPrefix(tc.hs.URL, "http://")
	write := `{"path":"pwned.txt","content":"x"}`
	smuggled := "POST /v1/workspaces/" + ws.ID + "/tools/write HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(write)) + "\r\n\r\n" + write

	t.Run("content-length 0 hiding a body", func(t *testing.T) {
		raw := "POST /v1/workspaces/" + ws.ID + "/tools/write HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + bobToken +
			"\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n" + smuggled
		resps := rawRequest(t, addr, raw, 2)
		if len(resps) == 0 || resps[0].StatusCode != http.StatusNotFound {
			t.Fatalf("responses %v", statuses(resps))
		}
		// The hidden "request" carries no token: 401, never a write.
		if len(resps) != 2 || resps[1].StatusCode != http.StatusUnauthorized {
			t.Fatalf("hidden request answered %d", resps[1].StatusCode)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		chunk := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(write), write)
		raw := "POST /v1/workspaces/" + ws.ID + "/tools/write HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + bobToken +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
		if resps := rawRequest(t, addr, raw, 1); len(resps) == 0 || resps[0].StatusCode != http.StatusNotFound {
			t.Fatalf("responses %v", statuses(resps))
		}
	})
	t.Run("chunked and content-length together", func(t *testing.T) {
		raw := "POST /v1/workspaces/" + ws.ID + "/tools/write HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + bobToken +
			"\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(write), write)
		resps := rawRequest(t, addr, raw, 1)
		if len(resps) == 0 || (resps[0].StatusCode != http.StatusNotFound && resps[0].StatusCode != http.StatusBadRequest) {
			t.Fatalf("responses %v", statuses(resps))
		}
	})
	t.Run("oversized", func(t *testing.T) {
		big := map[string]any{"path": "pwned.txt", "content": strings.Repeat("x", 4096)}
		other, _ := tc.as(bobToken, "POST", "/v1/workspaces/"+ws.ID+"/tools/write", big)
		none, _ := tc.as(bobToken, "POST", "/v1/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa/tools/write", big)
		if other.StatusCode != http.StatusNotFound || none.StatusCode != http.StatusNotFound {
			t.Fatalf("oversized: foreign %d, missing %d; both must be 404", other.StatusCode, none.StatusCode)
		}
		own, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/tools/write", big)
		checkProblem(t, own, data, http.StatusRequestEntityTooLarge, "too_large")
	})
	t.Run("own workspace, body behind content-length 0", func(t *testing.T) {
		raw := "POST /v1/workspaces/" + ws.ID + "/tools/write HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + aliceToken +
			"\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n" + smuggled
		resps := rawRequest(t, addr, raw, 2)
		if len(resps) == 0 || resps[0].StatusCode != http.StatusBadRequest {
			t.Fatalf("responses %v", statuses(resps))
		}
	})
	if _, err := statHost(ws, "pwned.txt"); err == nil {
		t.Fatal("a bypass wrote into alice's workspace")
	}
}

func statuses(rs []*http.Response) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.StatusCode)
	}
	return out
}

// TestForwardedHeadersAreNotIdentity: X-Forwarded-For neither
// authenticates nor shows up as the source address.
func TestForwardedHeadersAreNotIdentity(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	resp, _ := tc.as(bobToken, "GET", "/v1/workspaces", nil, "X-Forwarded-For", "10.9.9.9", "X-Real-Ip", "10.9.9.9", "Forwarded", "for=10.9.9.9")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	req := tc.request("GET", "/v1/workspaces", nil)
	req.Header.Del("Authorization")
	req.Header.Set("X-Forwarded-User", "alice")
	req.Header.Set("X-Tenant", "alice")
	if r := tc.send(req); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("identity headers without a token: %d", r.StatusCode)
	}
	for _, ev := range tc.records() {
		if ev.SourceIP != "127.0.0.1" {
			t.Fatalf("sourceIP %q, want the connection's 127.0.0.1", ev.SourceIP)
		}
	}
}

// TestAuditReadOwnAndAdmin: GET /v1/audit gives a tenant its own records
// and an admin everyone's.
func TestAuditReadOwnAndAdmin(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	tc.createAs(aliceToken)
	tc.createAs(bobToken)
	tenantsIn := func(token, query string) map[string]bool {
		resp, data := tc.as(token, "GET", "/v1/audit"+query, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("audit: %d %s", resp.StatusCode, data)
		}
		var list struct{ Records []audit.Event }
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range list.Records {
			got[r.Tenant] = true
		}
		return got
	}
	if got := tenantsIn(aliceToken, ""); !got["alice"] || len(got) != 1 {
		t.Fatalf("alice reads %v", got)
	}
	if got := tenantsIn(aliceToken, "?tenant=bob"); len(got) != 0 {
		t.Fatalf("alice read bob's records: %v", got)
	}
	if got := tenantsIn(adminToken, ""); !got["alice"] || !got["bob"] {
		t.Fatalf("admin reads %v", got)
	}
	if got := tenantsIn(adminToken, "?tenant=bob"); !got["bob"] || len(got) != 1 {
		t.Fatalf("admin ?tenant=bob reads %v", got)
	}
	rep, err := audit.Verify(tc.auditPath)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("chain: %v %v", err, rep.Problems)
	}
}

// TestOwnershipSurvivesRestart: with an owners file, a workspace adopted
// after a restart still belongs to its tenant, not to the first one.
func TestOwnershipSurvivesRestart(t *testing.T) {
	state := t.TempDir()
	owners := filepath.Join(t.TempDir(), "owners.json")
	reg := func() *tenant.Registry {
		a, _ := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken(aliceToken)}}, nil)
		b, _ := tenant.New(tenant.Config{Name: "bob", TokenHashes: []string{tenant.HashToken(bobToken)}}, nil)
		r, err := tenant.NewRegistry(a, b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mod := func(c *broker.Config) { c.Tokens, c.Tenants, c.OwnersFile = nil, reg(), owners }
	first := newEnvAt(t, state, mod)
	ws := first.createAs(bobToken)
	second := newEnvAt(t, state, mod)
	if resp, data := second.as(bobToken, "GET", "/v1/workspaces/"+ws.ID, nil); resp.StatusCode != 200 {
		t.Fatalf("bob after restart: %d %s", resp.StatusCode, data)
	}
	if resp, _ := second.as(aliceToken, "GET", "/v1/workspaces/"+ws.ID, nil); resp.StatusCode != 404 {
		t.Fatalf("alice after restart: %d", resp.StatusCode)
	}
}

// TestTenantIsolationMCPSessions: /v1/mcp sessions belong to the tenant
// that opened them: another tenant's token can neither use nor end one,
// and is answered 404 as for an unknown id (the workspace endpoint is in
// TestTenantIsolationMatrix with every route under {id}).
func TestTenantIsolationMCPSessions(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	const accept = "application/json, text/event-stream"
	const version = "2025-11-25"
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"matrix","version":"1"}}}`
	resp, body := tc.as(aliceToken, "POST", "/v1/mcp", initialize, "Accept", accept, "Content-Type", "application/json")
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, method := range []string{"POST", "GET", "DELETE"} {
		var b any
		if method == "POST" {
			b = list
		}
		resp, body := tc.as(bobToken, method, "/v1/mcp", b, "Accept", accept, "Content-Type", "application/json",
			"Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s on alice's session: %d %s", method, resp.StatusCode, body)
		}
	}
	resp, body = tc.as(aliceToken, "POST", "/v1/mcp", list, "Accept", accept, "Content-Type", "application/json",
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"bash"`) {
		t.Fatalf("alice lost her session: %d %s", resp.StatusCode, body)
	}
}

// TestLinksDoNotCrossTenants: bob plants links in his own workspace to
// alice's (absolute, relative, to her file and to her directory) and
// asks every workspace route and every tool through them. Nothing of
// alice's comes back, changes or appears. Commands are included where
// the local sandbox confines them (as root); an unsandboxed local
// command reaches what the broker's user reaches.
func TestLinksDoNotCrossTenants(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	alice := tc.createAs(aliceToken)
	const secret = "alice-secret-4242"
	writeHost(t, alice, "keep.txt", secret+"\n")
	bob := tc.createAs(bobToken)
	rel, err := filepath.Rel(bob.Root, alice.Root)
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"abs":     filepath.Join(alice.Root, "keep.txt"),
		"rel":     filepath.Join(rel, "keep.txt"),
		"dir":     alice.Root,
		"reldir":  rel,
		"nest/up": filepath.Join("..", rel, "keep.txt"),
	}
	for name, target := range links {
		if err := os.MkdirAll(filepath.Dir(hostPath(bob, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, hostPath(bob, name)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"abs", "rel", "dir/keep.txt", "reldir/keep.txt", "nest/up", "dir", "reldir", "dir/planted.txt", "reldir/new/dir"}
	sandboxed := os.Geteuid() == 0
	leaked := func(what string, status int, body []byte) {
		t.Helper()
		if strings.Contains(string(body), secret) {
			t.Errorf("%s: %d, alice's secret came back: %s", what, status, body)
		}
	}
	base := "/v1/workspaces/" + bob.ID
	for _, p := range paths {
		for _, rc := range routeCases(t, tc.srv.Handler()) {
			method, route := rc[0], rc[1]
			if !strings.Contains(route, "{id}") || strings.Contains(route, "/mcp") || (strings.HasSuffix(route, "/exec") && !sandboxed) ||
				(method == http.MethodDelete && route == "/v1/workspaces/{id}") {
				continue
			}
			bodies := map[string]any{
				"/v1/workspaces/{id}/tools":  map[string]any{"calls": []any{map[string]any{"name": "read", "arguments": map[string]any{"path": p}}}},
				"/v1/workspaces/{id}/exec":   map[string]any{"command": "cat " + p + "; echo bob > " + p + "/planted 2>/dev/null; echo bob >> " + p},
				"/v1/workspaces/{id}/glob":   map[string]any{"pattern": "**", "cwd": p},
				"/v1/workspaces/{id}/search": map[string]any{"pattern": "secret", "path": p},
				"/v1/workspaces/{id}/files":  "bob was here",
			}
			if route == "/v1/workspaces/{id}/tools/{name}" {
				continue // every tool below
			}
			resp, data := tc.as(bobToken, method, fill(route, bob.ID)+"?path="+p, bodies[route])
			leaked(method+" "+route+" "+p, resp.StatusCode, data)
		}
		tools := map[string]any{
			"read":  map[string]any{"path": p},
			"write": map[string]any{"path": p, "content": "bob"},
			"edit":  map[string]any{"path": p, "edits": []any{map[string]any{"oldText": "alice", "newText": "bob"}}},
			"grep":  map[string]any{"pattern": "secret", "path": p},
			"find":  map[string]any{"pattern": "*", "path": p},
			"ls":    map[string]any{"path": p},
		}
		if sandboxed {
			tools["bash"] = map[string]any{"command": "cat " + p + "; ls " + p}
		}
		for name, args := range tools {
			resp, data := tc.as(bobToken, "POST", base+"/tools/"+name, args)
			leaked("tool "+name+" "+p, resp.StatusCode, data)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("tool %s %s: %d %s, want a tool result", name, p, resp.StatusCode, data)
			}
		}
	}
	if got := readHost(t, alice, "keep.txt"); got != secret+"\n" {
		t.Errorf("alice's file became %q", got)
	}
	entries, err := os.ReadDir(alice.Root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("alice's workspace holds %v, want keep.txt alone", names)
	}
}
