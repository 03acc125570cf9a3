package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/mcp"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/wire"
)

// toolCall is one call of the sequences run over both routes.
type toolCall struct {
	name string
	args map[string]any
}

// everyTool calls each of the seven tools, errors and an image included.
var everyTool = []toolCall{
	{"write", map[string]any{"path": "a.txt", "content": "hello\nworld\n"}},
	{"read", map[string]any{"path": "a.txt"}},
	{"edit", map[string]any{"path": "a.txt", "edits": []any{map[string]any{"oldText": "world", "newText": "there"}}}},
	{"read", map[string]any{"path": "a.txt", "offset": 2}},
	{"bash", map[string]any{"command": "cat a.txt; echo oops >&2; exit 3"}},
	{"bash", map[string]any{"command": "echo fine"}},
	{"grep", map[string]any{"pattern": "hel+o"}},
	{"find", map[string]any{"pattern": "*.txt"}},
	{"ls", map[string]any{}},
	{"read", map[string]any{"path": "missing.txt"}},
	{"edit", map[string]any{"path": "a.txt"}}, // invalid arguments
}

func writePNG(t *testing.T, path string) {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compareRoutes runs calls over the HTTP tool route in one workspace and
// over MCP in another, set up alike, and wants equal results.
func compareRoutes(t *testing.T, h *harness, viaHTTP, viaMCP wire.WorkspaceInfo, cs *sdk.ClientSession, calls []toolCall) {
	t.Helper()
	for i, c := range calls {
		want := normalized(t, h.httpTool(aliceToken, viaHTTP.ID, c.name, c.args), viaHTTP.Root)
		got := normalized(t, wireOf(t, callMCP(t, cs, c.name, c.args)), viaMCP.Root)
		if got != want {
			t.Errorf("call %d %s %v:\nMCP:  %s\nHTTP: %s", i, c.name, c.args, got, want)
		}
	}
}

// TestWorkspaceEndpointMatchesHTTPRoute: every tool over
// /v1/workspaces/{id}/mcp answers what the HTTP tool route answers, and
// the tools listed are GET /v1/tools's, with no workspace argument.
func TestWorkspaceEndpointMatchesHTTPRoute(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	a, b := h.create(aliceToken), h.create(aliceToken)
	writePNG(t, filepath.Join(a.Root, "img.png"))
	writePNG(t, filepath.Join(b.Root, "img.png"))
	cs := h.mustConnect(aliceToken, "/v1/workspaces/"+b.ID+"/mcp", nil)
	if v := cs.InitializeResult().ProtocolVersion; !slices.Contains(mcp.ProtocolVersions(), v) {
		t.Fatalf("negotiated %q, not among %v", v, mcp.ProtocolVersions())
	}
	var defs wire.ToolList
	h.do(aliceToken, "GET", "/v1/tools", nil, &defs)
	listed, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Tools) != len(defs.Tools) || len(defs.Tools) != 7 {
		t.Fatalf("MCP lists %d tools, GET /v1/tools %d", len(listed.Tools), len(defs.Tools))
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range listed.Tools {
		byName[tl.Name] = tl
	}
	for i, d := range defs.Tools {
		got, ok := byName[d.Name]
		if !ok {
			t.Errorf("MCP does not list %s", d.Name)
			continue
		}
		schema, _ := json.Marshal(got.InputSchema)
		if got.Name != d.Name || got.Description != d.Description || !jsonEqual(schema, d.Parameters) {
			t.Errorf("tool %d: MCP %s %s, HTTP %s %s", i, got.Name, schema, d.Name, d.Parameters)
		}
		if strings.Contains(string(schema), "workspace") {
			t.Errorf("tool %s takes a workspace argument: %s", got.Name, schema)
		}
	}
	calls := append(slices.Clone(everyTool), toolCall{"read", map[string]any{"path": "img.png"}})
	compareRoutes(t, h, a, b, cs, calls)
	res := callMCP(t, cs, "read", map[string]any{"path": "img.png"})
	if len(res.Content) < 2 {
		t.Fatalf("image read: %+v", res.Content)
	}
	if img, ok := res.Content[1].(*sdk.ImageContent); !ok || img.MIMEType != "image/png" {
		t.Fatalf("image read: %T %+v", res.Content[1], res.Content[1])
	}
}

// TestPolicyFiltersAndBlocks: a tool the policy denies is not listed (nor
// callable), and a denied call is an isError result with pi's text.
func TestPolicyFiltersAndBlocks(t *testing.T) {
	pol, err := policy.Parse([]byte("name: strict\ntools:\n  deny: [bash]\npaths:\n  read:\n    deny: [\"secret/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, pol, nil, nil)
	ws := h.create(aliceToken)
	for _, path := range []string{"/v1/workspaces/" + ws.ID + "/mcp", "/v1/mcp"} {
		cs := h.mustConnect(aliceToken, path, nil)
		listed, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range listed.Tools {
			if tl.Name == "bash" {
				t.Fatalf("%s lists bash, which the policy denies", path)
			}
		}
		if res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}); err == nil && !res.IsError {
			t.Fatalf("%s: an unlisted bash ran: %+v", path, res)
		}
		res := callMCP(t, cs, "read", map[string]any{"path": "secret/key"})
		if !res.IsError || !strings.HasPrefix(text(res), "Blocked by policy: ") {
			t.Fatalf("%s: denied read answered %v %q", path, res.IsError, text(res))
		}
	}
}

// TestCancelKillsBashTree: a cancelled call kills the command's tree (a
// background sleep included), and progress carries the output's tail.
func TestCancelKillsBashTree(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	ws := h.create(aliceToken)
	var mu sync.Mutex
	var progress []string
	cs := h.mustConnect(aliceToken, "/v1/workspaces/"+ws.ID+"/mcp", &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
	})
	params := &sdk.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "echo started; sleep 300 & echo $! > sleep.pid; wait"}}
	params.SetProgressToken("tok-1")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	pidFile := filepath.Join(ws.Root, "sleep.pid")
	eventually(t, "the sleep's pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	eventually(t, "a progress notification with the output", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(progress, func(m string) bool { return strings.Contains(m, "started") })
	})
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		t.Logf("the cancelled call returned %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	eventually(t, "the sleep to die", func() bool { return !alive(pid) })
	// The session outlives a cancelled call.
	if res := callMCP(t, cs, "bash", map[string]any{"command": "echo again"}); text(res) != "again\n" {
		t.Fatalf("after the cancel: %q", text(res))
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// TestEndedSessionKillsBash: a session ended mid-call (DELETE) or a
// dropped connection kills the command's tree, as a dropped HTTP stream
// does. (The SDK client's own Close waits for its calls to return.)
func TestEndedSessionKillsBash(t *testing.T) {
	for _, how := range []string{"delete", "dropped"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, nil, nil, nil)
			ws := h.create(aliceToken)
			path := "/v1/workspaces/" + ws.ID + "/mcp"
			cs := h.mustConnect(aliceToken, path, nil)
			go func() {
				_, _ = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "bash", Arguments: map[string]any{
					"command": "sleep 300 & echo $! > sleep.pid; wait"}})
			}()
			pidFile := filepath.Join(ws.Root, "sleep.pid")
			eventually(t, "the sleep's pid file", func() bool {
				b, err := os.ReadFile(pidFile)
				return err == nil && strings.HasSuffix(string(b), "\n")
			})
			b, _ := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if how == "dropped" {
				h.hs.CloseClientConnections()
			} else {
				req, _ := http.NewRequest("DELETE", h.hs.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+aliceToken)
				req.Header.Set("Mcp-Session-Id", cs.ID())
				req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			eventually(t, "the sleep to die", func() bool { return !alive(pid) })
			if how == "delete" {
				eventually(t, "the session's end", func() bool { return h.srv.MCPSessions("alice") == 0 })
			}
		})
	}
}

// sessionWorkspaces lists the tenant's workspaces over HTTP.
func (h *harness) workspaces(token string) []wire.WorkspaceInfo {
	h.t.Helper()
	var list wire.WorkspaceList
	h.do(token, "GET", "/v1/workspaces", nil, &list)
	return list.Workspaces
}

// TestSessionEndpointLifecycle: /v1/mcp creates the session's workspace
// on the first tool call, from the query, and deletes it when the session
// ends, unless configured to keep it.
func TestSessionEndpointLifecycle(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run("keep="+strconv.FormatBool(keep), func(t *testing.T) {
			h := newHarness(t, nil, nil, func(c *broker.Config) { c.MCP.KeepWorkspaces = keep })
			cs := h.mustConnect(aliceToken, "/v1/mcp?backend=local", nil)
			if n := len(h.workspaces(aliceToken)); n != 0 {
				t.Fatalf("%d workspaces before the first call", n)
			}
			if res := callMCP(t, cs, "bash", map[string]any{"command": "echo hi > f.txt; cat f.txt"}); text(res) != "hi\n" {
				t.Fatalf("first call: %q", text(res))
			}
			if res := callMCP(t, cs, "read", map[string]any{"path": "f.txt"}); text(res) != "hi\n" {
				t.Fatalf("second call, same workspace: %q", text(res))
			}
			if n := len(h.workspaces(aliceToken)); n != 1 {
				t.Fatalf("%d workspaces after two calls, want 1", n)
			}
			_ = cs.Close()
			want := 0
			if keep {
				want = 1
			}
			eventually(t, "the session's end", func() bool { return h.srv.MCPSessions("alice") == 0 })
			eventually(t, "the workspace count", func() bool { return len(h.workspaces(aliceToken)) == want })
		})
	}
}

// TestSessionEndpointManagesWorkspaces: the workspace_* tools create,
// list, select and delete; another tenant's workspace is not found, in
// the same words as a missing one.
func TestSessionEndpointManagesWorkspaces(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *broker.Config) {
		c.Profiles = map[string]mcp.Profile{"plain": {Backend: "local"}}
	})
	alices := h.create(aliceToken)
	cs := h.mustConnect(bobToken, "/v1/mcp?profile=plain", nil)
	first := callMCP(t, cs, mcp.ToolWorkspaceCreate, map[string]any{"profile": "plain"})
	var made mcp.WorkspaceEntry
	if err := json.Unmarshal([]byte(text(first)), &made); err != nil || !made.Current {
		t.Fatalf("create: %q %v", text(first), err)
	}
	// The service decides a profile with a backend, as on POST /v1/workspaces.
	if res := callMCP(t, cs, mcp.ToolWorkspaceCreate, map[string]any{"profile": "plain", "backend": "local"}); !res.IsError ||
		!strings.Contains(text(res), "not both") {
		t.Fatalf("profile and backend: %q", text(res))
	}
	callMCP(t, cs, "write", map[string]any{"path": "x.txt", "content": "in the first"})
	callMCP(t, cs, mcp.ToolWorkspaceCreate, map[string]any{})
	if res := callMCP(t, cs, "read", map[string]any{"path": "x.txt"}); !res.IsError {
		t.Fatalf("the new workspace has the first's file: %q", text(res))
	}
	callMCP(t, cs, mcp.ToolWorkspaceSelect, map[string]any{"id": made.ID})
	if res := callMCP(t, cs, "read", map[string]any{"path": "x.txt"}); text(res) != "in the first" {
		t.Fatalf("after select: %q", text(res))
	}
	var listed []mcp.WorkspaceEntry
	_ = json.Unmarshal([]byte(text(callMCP(t, cs, mcp.ToolWorkspaceList, map[string]any{}))), &listed)
	if len(listed) != 2 {
		t.Fatalf("bob lists %+v", listed)
	}
	const missing = "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, tool := range []string{mcp.ToolWorkspaceSelect, mcp.ToolWorkspaceDelete} {
		foreign := callMCP(t, cs, tool, map[string]any{"id": alices.ID})
		none := callMCP(t, cs, tool, map[string]any{"id": missing})
		if !foreign.IsError || strings.ReplaceAll(text(foreign), alices.ID, "ID") != strings.ReplaceAll(text(none), missing, "ID") {
			t.Fatalf("%s of alice's workspace: %q; of a missing one: %q", tool, text(foreign), text(none))
		}
	}
	callMCP(t, cs, mcp.ToolWorkspaceDelete, map[string]any{"id": made.ID})
	if n := len(h.workspaces(bobToken)); n != 1 {
		t.Fatalf("bob has %d workspaces after a delete, want 1", n)
	}
	if n := len(h.workspaces(aliceToken)); n != 1 {
		t.Fatalf("alice has %d workspaces, want her 1", n)
	}
}

// TestSessionsAreTheTenants: a session opened by one tenant is refused to
// another's token, on both endpoints; and alice's workspace endpoint is
// bob's 404.
func TestSessionsAreTheTenants(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	ws := h.create(aliceToken)
	if _, err := h.connect(bobToken, "/v1/workspaces/"+ws.ID+"/mcp", nil); err == nil {
		t.Fatal("bob connected to alice's workspace endpoint")
	}
	for _, path := range []string{"/v1/workspaces/" + ws.ID + "/mcp", "/v1/mcp"} {
		cs := h.mustConnect(aliceToken, path, nil)
		req, _ := http.NewRequest("POST", h.hs.URL+path, strings.NewReader(
			`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ls","arguments":{}}}`))
		req.Header.Set("Authorization", "Bearer "+bobToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("%s: bob used alice's session: %d", path, resp.StatusCode)
		}
	}
}

// TestSessionCapAndIdleExpiry: a tenant's sessions past the cap are
// refused; an idle session expires, giving its slot back and deleting its
// workspace.
func TestSessionCapAndIdleExpiry(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *broker.Config) {
		c.MCP.MaxSessionsPerTenant = 1
		c.MCP.IdleTimeout = 700 * time.Millisecond
	})
	cs := h.mustConnect(aliceToken, "/v1/mcp", nil)
	callMCP(t, cs, "ls", map[string]any{})
	if _, err := h.connect(aliceToken, "/v1/mcp", nil); err == nil {
		t.Fatal("a second session opened past the cap of 1")
	}
	other := h.mustConnect(bobToken, "/v1/mcp", nil) // bob's cap is his own
	_ = other.Close()
	if n := len(h.workspaces(aliceToken)); n != 1 {
		t.Fatalf("%d workspaces, want the session's 1", n)
	}
	eventually(t, "the idle session to expire", func() bool { return h.srv.MCPSessions("alice") == 0 })
	eventually(t, "its workspace to go", func() bool { return len(h.workspaces(aliceToken)) == 0 })
	h.mustConnect(aliceToken, "/v1/mcp", nil)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
