//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/wire"
)

const strictPolicy = `
name: strict
tools:
  deny: [write]
paths:
  read:
    deny: ["**/.env", "private/**"]
  write:
    allow: ["src/**"]
commands:
  deny: ['\bcurl\b']
maxTimeout: 20s
env:
  allow: ["LANG"]
redact:
  - name: key
    pattern: 'SECRET-[0-9]{6}'
`

func policyTenancy(t *testing.T) (*tenancy, wire.WorkspaceInfo) {
	t.Helper()
	pol, err := policy.Parse([]byte(strictPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tc := newTenancy(t, nil, pol, nil)
	ws := tc.createAs(aliceToken)
	writeHost(t, ws, ".env", "API=SECRET-111111\n")
	writeHost(t, ws, "private/notes.txt", "SECRET-222222 private\n")
	writeHost(t, ws, "src/a.txt", "hello SECRET-333333 world\n")
	return tc, ws
}

func (tc *tenancy) tool(ws wire.WorkspaceInfo, name string, args any) tools.Result {
	tc.t.Helper()
	resp, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/tools/"+name, args)
	if resp.StatusCode != 200 {
		tc.t.Fatalf("tool %s: %d %s", name, resp.StatusCode, data)
	}
	var res tools.Result
	if err := json.Unmarshal(data, &res); err != nil {
		tc.t.Fatal(err)
	}
	return res
}

func text(r tools.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func blocked(t *testing.T, r tools.Result, want string) {
	t.Helper()
	if !r.IsError || !strings.HasPrefix(text(r), "Blocked by policy: ") || !strings.Contains(text(r), want) {
		t.Fatalf("result %+v, want a policy block mentioning %q", r, want)
	}
}

// TestPolicyBlocksToolCalls: each rule kind stops a tool call before it
// runs, with the model-visible reason, and is audited.
func TestPolicyBlocksToolCalls(t *testing.T) {
	tc, ws := policyTenancy(t)
	blocked(t, tc.tool(ws, "write", map[string]any{"path": "src/b.txt", "content": "x"}), `tool "write"`)
	if _, err := statHost(ws, "src/b.txt"); err == nil {
		t.Fatal("a blocked write ran")
	}
	blocked(t, tc.tool(ws, "read", map[string]any{"path": ".env"}), "**/.env")
	blocked(t, tc.tool(ws, "read", map[string]any{"path": "src/../private/notes.txt"}), "private/**")
	blocked(t, tc.tool(ws, "edit", map[string]any{"path": "README", "edits": []any{map[string]any{"oldText": "a", "newText": "b"}}}), "no allow rule")
	blocked(t, tc.tool(ws, "bash", map[string]any{"command": "curl http://127.0.0.1:1"}), "advisory")
	blocked(t, tc.tool(ws, "bash", map[string]any{"command": "true", "timeout": 60}), "maximum")
	// A link to a denied file is read as the file it leads to.
	if err := os.Symlink(".env", hostPath(ws, "src/innocent.txt")); err != nil {
		t.Fatal(err)
	}
	r := tc.tool(ws, "read", map[string]any{"path": "src/innocent.txt"})
	if !r.IsError || strings.Contains(text(r), "SECRET-111111") {
		t.Fatalf("read through a link: %+v", r)
	}
	// grep over everything skips the denied files' lines.
	r = tc.tool(ws, "grep", map[string]any{"pattern": "SECRET", "path": "."})
	if strings.Contains(text(r), ".env") || strings.Contains(text(r), "private/") || !strings.Contains(text(r), "src/a.txt") {
		t.Fatalf("grep result %q", text(r))
	}
	// An allowed edit goes through.
	if r := tc.tool(ws, "edit", map[string]any{"path": "src/a.txt", "edits": []any{map[string]any{"oldText": "hello", "newText": "bye"}}}); r.IsError {
		t.Fatalf("allowed edit: %+v", r)
	}
	denied := map[string]bool{}
	for _, ev := range tc.records() {
		if ev.Stage == audit.StageToolCall && ev.Decision == "deny" {
			denied[ev.Rule] = true
		}
	}
	for _, rule := range []string{"tools", "paths.read", "paths.write", "commands", "maxTimeout"} {
		if !denied[rule] {
			t.Errorf("no audited %s denial among %v", rule, denied)
		}
	}
}

// TestToolListFollowsPolicy: GET /v1/tools leaves out denied tools.
func TestToolListFollowsPolicy(t *testing.T) {
	tc, _ := policyTenancy(t)
	var list wire.ToolList
	_, data := tc.as(aliceToken, "GET", "/v1/tools", nil)
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list.Tools {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "read,bash,edit,grep,find,ls" {
		t.Fatalf("alice is offered %v", names)
	}
	_, data = tc.as(bobToken, "GET", "/v1/tools", nil)
	if err := json.Unmarshal(data, &list); err != nil || len(list.Tools) != 7 {
		t.Fatalf("bob is offered %d tools", len(list.Tools))
	}
}

// TestPolicyRawRoutes: the raw operation routes answer 403 `denied`.
func TestPolicyRawRoutes(t *testing.T) {
	tc, ws := policyTenancy(t)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", wsPath(ws, "/files", ".env"), nil},
		{"GET", wsPath(ws, "/stat", "private/notes.txt"), nil},
		{"PUT", wsPath(ws, "/files", "src/new.txt"), "data"}, // the write tool is denied, edit is not: allowed
		{"PUT", wsPath(ws, "/files", "README"), "data"},
		{"POST", wsPath(ws, "/dirs", "src/d"), nil},
		{"POST", "/v1/workspaces/" + ws.ID + "/exec", map[string]any{"command": "curl x"}},
		{"POST", "/v1/workspaces/" + ws.ID + "/exec", map[string]any{"command": "env", "env": []string{"AWS_SECRET_ACCESS_KEY=abc"}}},
		{"POST", "/v1/workspaces/" + ws.ID + "/exec", map[string]any{"command": "true", "timeout": 100}},
		{"POST", "/v1/workspaces/" + ws.ID + "/search", map[string]any{"pattern": "x", "path": "private"}},
	} {
		resp, data := tc.as(aliceToken, c.method, c.path, c.body)
		if c.path == wsPath(ws, "/files", "src/new.txt") {
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("PUT src/new.txt: %d %s", resp.StatusCode, data)
			}
			continue
		}
		p := checkProblem(t, resp, data, http.StatusForbidden, "denied")
		if !strings.Contains(p.Detail, "Blocked by policy: ") {
			t.Errorf("%s %s: detail %q", c.method, c.path, p.Detail)
		}
	}
}

// TestRedactionFinalAndStreamed: a secret leaves the broker in no final
// result, no NDJSON update and no exec output line, even when the command
// prints it in two pieces.
func TestRedactionFinalAndStreamed(t *testing.T) {
	tc, ws := policyTenancy(t)
	r := tc.tool(ws, "read", map[string]any{"path": "src/a.txt"})
	if strings.Contains(text(r), "SECRET-333333") || !strings.Contains(text(r), "[REDACTED:key]") {
		t.Fatalf("read result %q", text(r))
	}
	cmd := "for i in 1 2 3; do printf 'SECRET-'; sleep 0.2; printf '44444%s\\n' $i; done"
	resp, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/tools/bash", map[string]any{"command": cmd}, "Accept", "application/x-ndjson")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	if strings.Contains(string(data), "SECRET-4444") || !strings.Contains(string(data), "[REDACTED:key]") {
		t.Fatalf("bash stream leaks or lacks redaction:\n%s", data)
	}
	if strings.Count(string(data), `"type":"update"`) == 0 {
		t.Fatalf("no updates were streamed:\n%s", data)
	}
	// /exec: decode every output line and join them.
	resp, data = tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": cmd})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	lines := 0
	for sc.Scan() {
		var l struct {
			Type string
			Data string
		}
		_ = json.Unmarshal(sc.Bytes(), &l)
		if l.Type == "output" {
			lines++
			b, _ := base64.StdEncoding.DecodeString(l.Data)
			out.Write(b)
		}
	}
	if strings.Contains(out.String(), "SECRET-4444") || strings.Count(out.String(), "[REDACTED:key]") != 3 {
		t.Fatalf("exec output %q", out.String())
	}
	// Raw file reads and search lines too.
	_, data = tc.as(aliceToken, "GET", wsPath(ws, "/files", "src/a.txt"), nil)
	if strings.Contains(string(data), "SECRET-") {
		t.Fatalf("GET /files: %q", data)
	}
	_, data = tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/search", map[string]any{"pattern": "hello", "path": "src"})
	if strings.Contains(string(data), "SECRET-") {
		t.Fatalf("search: %s", data)
	}
}

// TestRedactionBeforeGrepCutsLines: grep cuts a line at 500 characters;
// a secret across the cut is redacted whole, not cut to a prefix the rule
// no longer matches.
func TestRedactionBeforeGrepCutsLines(t *testing.T) {
	tc, ws := policyTenancy(t)
	writeHost(t, ws, "src/long.txt", "hello "+strings.Repeat("x", 490)+"SECRET-555555 tail\n")
	r := tc.tool(ws, "grep", map[string]any{"pattern": "hello", "path": "src/long.txt"})
	// The cut falls inside the marker now, not inside the secret.
	if strings.Contains(text(r), "SECR") || !strings.Contains(text(r), "x[RED... [truncated]") {
		t.Fatalf("grep result %q", text(r))
	}
}

// TestAuditHoldsNoSecrets: tokens, file contents and env values never
// reach the audit file, though the calls that carried them are recorded.
func TestAuditHoldsNoSecrets(t *testing.T) {
	tc := newTenancy(t, nil, nil, nil)
	ws := tc.createAs(aliceToken)
	const content, envValue, upload = "CONTENT-d41d8cd98f", "ENVVALUE-9e107d9d372", "UPLOAD-e4d909c290d0"
	tc.tool(ws, "write", map[string]any{"path": "a.txt", "content": content})
	tc.tool(ws, "edit", map[string]any{"path": "a.txt", "edits": []any{map[string]any{"oldText": content, "newText": content + "2"}}})
	tc.tool(ws, "read", map[string]any{"path": "a.txt"})
	tc.as(aliceToken, "PUT", wsPath(ws, "/files", "b.txt"), upload)
	tc.as(aliceToken, "GET", wsPath(ws, "/files", "b.txt"), nil)
	tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": "echo $X", "env": []string{"X=" + envValue}})
	tc.as(bobToken, "GET", "/v1/workspaces", nil)
	tc.as("wrong-token-abcdef", "GET", "/v1/workspaces", nil)
	b, err := os.ReadFile(tc.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{content, envValue, upload, aliceToken, bobToken, "wrong-token-abcdef"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the audit file contains %q", secret)
		}
	}
	var sawWrite, sawExec, sawUnauth bool
	for _, ev := range tc.records() {
		if ev.Tool == "write" && ev.Args.Path == "a.txt" && strings.HasPrefix(ev.Args.Digest, "sha256:") {
			sawWrite = true
		}
		if ev.Route == "/v1/workspaces/{id}/exec" && ev.Args.Command == "echo $X" && len(ev.Args.Env) == 1 && ev.Args.Env[0] == "X" &&
			ev.Result.ExitCode != nil && *ev.Result.ExitCode == 0 {
			sawExec = true
		}
		if ev.Result.Status == http.StatusUnauthorized && ev.Decision == "deny" && ev.Tenant == "" {
			sawUnauth = true
		}
	}
	if !sawWrite || !sawExec || !sawUnauth {
		t.Fatalf("missing records: write %v exec %v unauthorized %v\n%s", sawWrite, sawExec, sawUnauth, b)
	}
}

// TestCreateAdmission: backends, workspace quota and disk quota.
func TestCreateAdmission(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) {
		c.Quotas.Workspaces = 1
		c.Quotas.DiskBytes = 1000
		c.Backends = []string{"local"}
	}, nil, nil)
	resp, data := tc.as(aliceToken, "POST", "/v1/workspaces", map[string]any{"backend": "docker"})
	if resp.StatusCode != http.StatusBadRequest { // not configured here: unknown backend
		t.Fatalf("docker: %d %s", resp.StatusCode, data)
	}
	ws := tc.createAs(aliceToken)
	resp, data = tc.as(aliceToken, "POST", "/v1/workspaces", map[string]any{})
	checkProblem(t, resp, data, http.StatusForbidden, "denied")
	tc.createAs(bobToken) // bob has no quota
	writeHost(t, ws, "big", strings.Repeat("x", 2000))
	r := tc.tool(ws, "write", map[string]any{"path": "more", "content": "y"})
	if !r.IsError || !strings.Contains(text(r), "disk quota") {
		t.Fatalf("write over the disk quota: %+v", r)
	}
	resp, data = tc.as(aliceToken, "PUT", wsPath(ws, "/files", "more"), "y")
	checkProblem(t, resp, data, http.StatusForbidden, "denied")
	if r := tc.tool(ws, "read", map[string]any{"path": "big", "limit": 1}); r.IsError {
		t.Fatalf("reading is not stopped by the disk quota: %+v", r)
	}
}

// TestGuardForwardsEveryInterface: for every interface opsapi declares,
// if the backend's workspace implements it, the policy wrapper decides on
// it too, or it is an ability with nothing to decide that opsapi.As finds
// through the wrapper. The list comes from opsapi's source, so a new
// interface is covered.
func TestGuardForwardsEveryInterface(t *testing.T) {
	fset := token.NewFileSet()
	srcs, err := filepath.Glob(filepath.Join("..", "opsapi", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	ifaces := map[string]*ast.InterfaceType{}
	for _, name := range srcs {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if it, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() {
					ifaces[ts.Name.Name] = it
				}
			}
			return true
		})
	}
	var methods func(name string) []string
	methods = func(name string) []string {
		var out []string
		for _, m := range ifaces[name].Methods.List {
			if len(m.Names) > 0 {
				out = append(out, m.Names[0].Name)
			} else if id, ok := m.Type.(*ast.Ident); ok {
				out = append(out, methods(id.Name)...)
			}
		}
		return out
	}
	b, err := local.New(local.Config{StateDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	inner, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "ws_guardcheck"})
	if err != nil {
		t.Fatal(err)
	}
	guard := policy.NewGuard(inner, func() *policy.Policy { return nil }, nil)
	has := func(v any, ms []string) bool {
		rt := reflect.TypeOf(v)
		for _, m := range ms {
			if _, ok := rt.MethodByName(m); !ok {
				return false
			}
		}
		return true
	}
	checked := 0
	for name := range ifaces {
		ms := methods(name)
		if len(ms) == 0 || !has(inner, ms) {
			continue
		}
		checked++
		if has(guard, ms) {
			continue
		}
		if found, ok := passedThrough[name]; !ok || !found(guard) {
			t.Errorf("the local workspace implements opsapi.%s but the policy Guard drops it", name)
		}
	}
	if checked < 9 {
		t.Fatalf("only %d interfaces checked; the source walk is broken", checked)
	}
	if _, ok := opsapi.As[opsapi.ReadOperations](policy.NewGuard(readOnly{inner}, nil, nil)); !ok {
		t.Error("opsapi.As lost an ability both the Guard and its workspace have")
	}
	if _, ok := opsapi.As[opsapi.BashOperations](policy.NewGuard(readOnly{inner}, nil, nil)); ok {
		t.Error("opsapi.As offers an ability the Guard's workspace lacks")
	}
	if guard.Unwrap() != inner {
		t.Fatal("Unwrap lost the workspace")
	}
}

// passedThrough are the abilities the Guard does not wrap: nothing to
// decide. opsapi.As must find them through it.
var passedThrough = map[string]func(opsapi.Workspace) bool{
	"Destroyer":      func(ws opsapi.Workspace) bool { _, ok := opsapi.As[opsapi.Destroyer](ws); return ok },
	"ProcessManager": func(ws opsapi.Workspace) bool { _, ok := opsapi.As[opsapi.ProcessManager](ws); return ok },
	"CreationTimer":  func(ws opsapi.Workspace) bool { _, ok := opsapi.As[opsapi.CreationTimer](ws); return ok },
	"DiskMeasurer":   func(ws opsapi.Workspace) bool { _, ok := opsapi.As[opsapi.DiskMeasurer](ws); return ok },
	"DiskLimiter":    func(ws opsapi.Workspace) bool { _, ok := opsapi.As[opsapi.DiskLimiter](ws); return ok },
	"ConfinementReporter": func(ws opsapi.Workspace) bool {
		_, ok := opsapi.As[opsapi.ConfinementReporter](ws)
		return ok
	},
}

// readOnly is a workspace that can only be read.
type readOnly struct{ ws opsapi.Workspace }

func (r readOnly) Root() string { return r.ws.Root() }
func (r readOnly) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	return r.ws.(opsapi.ReadOperations).Open(ctx, p)
}
func (r readOnly) Access(ctx context.Context, p string, m opsapi.AccessMode) error {
	return r.ws.(opsapi.ReadOperations).Access(ctx, p, m)
}

// TestNetworkRuleAtCreate: a policy allowing only network "none" refuses
// a local workspace, whose commands share the host's network.
func TestNetworkRuleAtCreate(t *testing.T) {
	pol, err := policy.Parse([]byte("network:\n  allow: [none]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tc := newTenancy(t, nil, pol, nil)
	resp, data := tc.as(aliceToken, "POST", "/v1/workspaces", map[string]any{})
	p := checkProblem(t, resp, data, http.StatusForbidden, "denied")
	if !strings.Contains(p.Detail, `Blocked by policy: network mode "host"`) {
		t.Fatalf("detail %q", p.Detail)
	}
	tc.createAs(bobToken) // no policy
}

// TestBatchDeniesPerCall: in a batch, a denied call is an isError result
// and the others run.
func TestBatchDeniesPerCall(t *testing.T) {
	tc, ws := policyTenancy(t)
	var out wire.BatchResponse
	_, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/tools", map[string]any{
		"mode": "sequential",
		"calls": []any{
			map[string]any{"id": "1", "name": "write", "arguments": map[string]any{"path": "src/x", "content": "x"}},
			map[string]any{"id": "2", "name": "read", "arguments": map[string]any{"path": "src/a.txt"}},
			map[string]any{"id": "3", "name": "read", "arguments": map[string]any{"path": ".env"}},
		},
	})
	if err := json.Unmarshal(data, &out); err != nil || len(out.Results) != 3 {
		t.Fatalf("batch: %s", data)
	}
	blocked(t, out.Results[0].Result, `tool "write"`)
	if r := out.Results[1].Result; r.IsError || !strings.Contains(text(r), "[REDACTED:key]") {
		t.Fatalf("allowed read: %+v", r)
	}
	blocked(t, out.Results[2].Result, ".env")
	ids := map[string]bool{}
	for _, ev := range tc.records() {
		if ev.Stage == audit.StageToolCall {
			ids[ev.AuditID[strings.LastIndexByte(ev.AuditID, '/')+1:]] = true
		}
	}
	if !ids["1"] || !ids["2"] || !ids["3"] {
		t.Fatalf("tool call records %v", ids)
	}
}

// TestWorkspaceQuotaUnderParallelCreates: creates racing each other
// cannot together pass the quota.
func TestWorkspaceQuotaUnderParallelCreates(t *testing.T) {
	tc := newTenancy(t, func(c *tenant.Config) { c.Quotas.Workspaces = 2 }, nil, nil)
	codes := make(chan int, 6)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			req := tc.request("POST", "/v1/workspaces", map[string]any{})
			req.Header.Set("Authorization", "Bearer "+aliceToken)
			resp, err := tc.hs.Client().Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	created := 0
	for c := range codes {
		switch c {
		case http.StatusCreated:
			created++
		case http.StatusForbidden:
		default:
			t.Errorf("status %d", c)
		}
	}
	if created != 2 {
		t.Fatalf("%d workspaces created under a quota of 2", created)
	}
}

// TestMaxTimeoutAppliesToCommandsWithout: a command given no timeout is
// killed at the policy's maximum, through the tool and through /exec.
func TestMaxTimeoutAppliesToCommandsWithout(t *testing.T) {
	pol, err := policy.Parse([]byte("maxTimeout: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	tc := newTenancy(t, nil, pol, nil)
	ws := tc.createAs(aliceToken)
	r := tc.tool(ws, "bash", map[string]any{"command": "sleep 60"})
	if !r.IsError || !strings.Contains(text(r), "timed out") {
		t.Fatalf("bash without a timeout: %+v", r)
	}
	_, data := tc.as(aliceToken, "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": "sleep 60"})
	if !strings.Contains(string(data), `"timedOut":true`) {
		t.Fatalf("exec without a timeout: %s", data)
	}
}

// TestPolicyDecidesOnWhatAPathReallyIs: rules are matched against the
// path as given and against where its links lead, for tools and raw
// routes alike. Each of these went through before: grep of a link to a
// denied file, ls and find of a link to a denied directory, stat of a
// link (its size is the target's), a listing naming a link to a denied
// file, and mkdir through a link into a write-denied tree.
func TestPolicyDecidesOnWhatAPathReallyIs(t *testing.T) {
	tc, ws := policyTenancy(t)
	for link, target := range map[string]string{"src/envlink": "../.env", "src/privlink": "../private", "src/out": "../private"} {
		if err := os.Symlink(target, hostPath(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if r := tc.tool(ws, "grep", map[string]any{"pattern": "SECRET", "path": "src/envlink"}); !r.IsError || strings.Contains(text(r), "111111") {
		t.Errorf("grep through a link to .env: %+v", r)
	}
	if r := tc.tool(ws, "ls", map[string]any{"path": "src/privlink"}); !r.IsError || strings.Contains(text(r), "notes.txt") {
		t.Errorf("ls through a link to private/: %+v", r)
	}
	if r := tc.tool(ws, "find", map[string]any{"pattern": "*", "path": "src/privlink"}); !r.IsError || strings.Contains(text(r), "notes.txt") {
		t.Errorf("find through a link to private/: %+v", r)
	}
	if r := tc.tool(ws, "ls", map[string]any{"path": "src"}); r.IsError || strings.Contains(text(r), "envlink") || !strings.Contains(text(r), "a.txt") {
		t.Errorf("ls src shows the link to .env, or not the allowed file: %+v", r)
	}
	base := "/v1/workspaces/" + ws.ID
	if resp, data := tc.as(aliceToken, "GET", base+"/stat?path=src/envlink", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("stat of a link to .env: %d %s", resp.StatusCode, data)
	}
	if resp, data := tc.as(aliceToken, "GET", base+"/dirs?path=src/privlink", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("listing through a link to private/: %d %s", resp.StatusCode, data)
	}

	// mkdir through a link into a write-denied tree, with a policy that
	// lets the write tool (and so mkdir) run under src/.
	pol, err := policy.Parse([]byte("paths:\n  write:\n    allow: [\"src/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tw := newTenancy(t, nil, pol, nil)
	wws := tw.createAs(aliceToken)
	writeHost(t, wws, "private/notes.txt", "x")
	writeHost(t, wws, "src/a.txt", "x")
	if err := os.Symlink("../private", hostPath(wws, "src/out")); err != nil {
		t.Fatal(err)
	}
	mk := "/v1/workspaces/" + wws.ID + "/dirs?path="
	if resp, data := tw.as(aliceToken, "POST", mk+"src/made", nil); resp.StatusCode/100 != 2 {
		t.Fatalf("an allowed mkdir: %d %s", resp.StatusCode, data)
	}
	if resp, data := tw.as(aliceToken, "POST", mk+"src/out/planted", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("mkdir through a link into private/: %d %s", resp.StatusCode, data)
	}
	if _, err := os.Stat(hostPath(wws, "private/planted")); err == nil {
		t.Error("a directory was made in the write-denied tree")
	}
}

// TestListingsSayWhatThePolicyHid: ls, find and grep, and the raw
// listing, glob and search, leave out what the read rules hide (through
// links too) and say how many they left out.
func TestListingsSayWhatThePolicyHid(t *testing.T) {
	tc, ws := policyTenancy(t)
	if err := os.Symlink("../.env", hostPath(ws, "src/envlink")); err != nil {
		t.Fatal(err)
	}
	type details struct {
		Hidden int `json:"hidden"`
	}
	check := func(what string, r tools.Result, wantText, wantNotice string, hidden int) {
		t.Helper()
		var d details
		raw, _ := json.Marshal(r.Details)
		_ = json.Unmarshal(raw, &d)
		out := text(r)
		if r.IsError || !strings.Contains(out, wantText) || !strings.HasSuffix(out, "["+wantNotice+"]") || d.Hidden != hidden {
			t.Errorf("%s: %q details %s, want %q and the notice [%s], hidden %d", what, out, raw, wantText, wantNotice, hidden)
		}
		for _, secret := range []string{"111111", "222222", ".env", "notes.txt", "envlink"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows %q: %q", what, secret, out)
			}
		}
	}
	check("ls .", tc.tool(ws, "ls", map[string]any{"path": "."}), "src/", "2 entries hidden by policy", 2)
	check("ls src", tc.tool(ws, "ls", map[string]any{"path": "src"}), "a.txt", "1 entry hidden by policy", 1)
	check("grep", tc.tool(ws, "grep", map[string]any{"pattern": "SECRET", "path": "."}), "src/a.txt:1:", "2 matches hidden by policy", 2)
	check("grep with nothing left", tc.tool(ws, "grep", map[string]any{"pattern": "private", "path": "."}),
		"No matches found", "1 match hidden by policy", 1)
	check("find", tc.tool(ws, "find", map[string]any{"pattern": "**/*.txt"}), "src/a.txt", "1 path hidden by policy", 1)

	base := "/v1/workspaces/" + ws.ID
	var list wire.DirList
	if resp, data := tc.as(aliceToken, "GET", base+"/dirs?path=.", nil); resp.StatusCode != 200 || json.Unmarshal(data, &list) != nil || list.Hidden != 2 || len(list.Entries) != 1 {
		t.Errorf("GET /dirs: %d %s, want src alone and hidden 2", resp.StatusCode, data)
	}
	var found opsapi.SearchResult
	if resp, data := tc.as(aliceToken, "POST", base+"/search", map[string]any{"pattern": "SECRET", "path": "."}); resp.StatusCode != 200 || json.Unmarshal(data, &found) != nil || found.Hidden != 2 || len(found.Lines) != 1 {
		t.Errorf("POST /search: %d %s, want one line and hidden 2", resp.StatusCode, data)
	}
	var globbed opsapi.GlobResult
	if resp, data := tc.as(aliceToken, "POST", base+"/glob", map[string]any{"pattern": "**/*.txt", "cwd": "."}); resp.StatusCode != 200 || json.Unmarshal(data, &globbed) != nil || globbed.Hidden != 1 || len(globbed.Paths) != 1 {
		t.Errorf("POST /glob: %d %s, want src/a.txt alone and hidden 1", resp.StatusCode, data)
	}
}
