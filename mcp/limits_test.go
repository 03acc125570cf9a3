package mcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/tenant"
)

// The protocol version whose JSON-RPC batches the SDK still takes.
const batchVersion = "2025-03-26"

// countScript counts the calls running at once in files of the
// workspace, under a mkdir lock: "running" now, "max" the most seen.
const countScript = `lock() { until mkdir .lock 2>/dev/null; do sleep 0.01; done; }
lock; n=$(( $(cat running 2>/dev/null || echo 0) + 1 )); echo $n > running
m=$(cat max 2>/dev/null || echo 0); [ $n -gt $m ] && echo $n > max; rmdir .lock
sleep 0.3
lock; echo $(( $(cat running) - 1 )) > running; rmdir .lock; echo done`

// limited returns a mod giving alice quotas q and the broker an audit
// log, whose path it returns.
func limited(t *testing.T, q tenant.Quotas, more func(*broker.Config)) (func(*broker.Config), string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	return func(c *broker.Config) {
		at, err := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken(aliceToken)}, Quotas: q}, nil)
		if err != nil {
			t.Fatal(err)
		}
		bt, _ := tenant.New(tenant.Config{Name: "bob", TokenHashes: []string{tenant.HashToken(bobToken)}}, nil)
		if c.Tenants, err = tenant.NewRegistry(at, bt); err != nil {
			t.Fatal(err)
		}
		log, err := audit.Open(path, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = log.Close() })
		c.Audit = log
		if more != nil {
			more(c)
		}
	}, path
}

func records(t *testing.T, path string) []audit.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// rawAnswer is an MCP endpoint's HTTP answer.
type rawAnswer struct {
	status int
	ctype  string
	body   []byte
}

// rawPost sends one MCP message (or a batch) as a client of protocol
// batchVersion would.
func (h *harness) rawPost(token, path, sid, body string) rawAnswer {
	h.t.Helper()
	return h.rawDo(token, "POST", path, sid, body)
}

func (h *harness) rawDo(token, method, path, sid, body string) rawAnswer {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, h.hs.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", batchVersion)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if sid == "" && resp.StatusCode == http.StatusOK {
		data = append([]byte(resp.Header.Get("Mcp-Session-Id")+"\n"), data...)
	}
	return rawAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: data}
}

// rawSession initializes a session at protocol batchVersion and returns
// its id.
func (h *harness) rawSession(token, path string) string {
	h.t.Helper()
	a := h.rawPost(token, path, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+
		batchVersion+`","capabilities":{},"clientInfo":{"name":"batch","version":"1"}}}`)
	sid, _, _ := strings.Cut(string(a.body), "\n")
	if a.status != http.StatusOK || sid == "" {
		h.t.Fatalf("initialize on %s: %d %s", path, a.status, a.body)
	}
	if a := h.rawPost(token, path, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
		h.t.Fatalf("initialized on %s: %d %s", path, a.status, a.body)
	}
	return sid
}

// rpcResponse is one JSON-RPC response of a tools/call.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r rpcResponse) text() string {
	if r.Result == nil || len(r.Result.Content) == 0 {
		return ""
	}
	return r.Result.Content[0].Text
}

// responses reads the JSON-RPC responses of an answer, an SSE stream or
// JSON, each message alone or in an array.
func responses(t *testing.T, a rawAnswer) []rpcResponse {
	t.Helper()
	var payloads [][]byte
	if strings.HasPrefix(a.ctype, "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(a.body))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
				payloads = append(payloads, []byte(d))
			}
		}
	} else {
		payloads = [][]byte{a.body}
	}
	var out []rpcResponse
	for _, p := range payloads {
		var many []rpcResponse
		if json.Unmarshal(p, &many) == nil {
			out = append(out, many...)
			continue
		}
		var one rpcResponse
		if err := json.Unmarshal(p, &one); err != nil {
			t.Fatalf("not JSON-RPC: %s", p)
		}
		out = append(out, one)
	}
	return out
}

// toolBatch is a JSON-RPC batch of n tools/call of tool with args.
func toolBatch(n int, tool string, args any) string {
	a, _ := json.Marshal(args)
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i+1, tool, a)
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// TestBatchCallsHoldTheTenantsConcurrency: with concurrentCalls 3, a
// JSON-RPC batch of 12 bash calls to either MCP endpoint never has more
// than 3 running at once (counted by the calls themselves, in the
// workspace), and every call still runs.
func TestBatchCallsHoldTheTenantsConcurrency(t *testing.T) {
	mod, _ := limited(t, tenant.Quotas{ConcurrentCalls: 3}, nil)
	h := newHarness(t, nil, nil, mod)
	ws := h.create(aliceToken)
	for _, path := range []string{"/v1/workspaces/" + ws.ID + "/mcp", "/v1/mcp"} {
		t.Run(path, func(t *testing.T) {
			sid := h.rawSession(aliceToken, path)
			a := h.rawPost(aliceToken, path, sid, toolBatch(12, "bash", map[string]any{"command": countScript}))
			if a.status != http.StatusOK {
				t.Fatalf("batch: %d %s", a.status, a.body)
			}
			got := responses(t, a)
			if len(got) != 12 {
				t.Fatalf("%d responses to 12 calls: %s", len(got), a.body)
			}
			for _, r := range got {
				if r.Result == nil || r.Result.IsError || !strings.Contains(r.text(), "done") {
					t.Fatalf("call %s: %+v %s", r.ID, r.Result, r.text())
				}
			}
			root := ws.Root
			if path == "/v1/mcp" {
				for _, w := range h.workspaces(aliceToken) {
					if w.ID != ws.ID {
						root = w.Root
					}
				}
			}
			b, err := os.ReadFile(filepath.Join(root, "max"))
			most, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || most < 1 || most > 3 {
				t.Fatalf("%d bash calls of one batch ran at once (%v), concurrentCalls is 3", most, err)
			}
		})
	}
}

// TestBatchCallsChargeTheTenantsRate: with a burst of 6 and almost no
// refill, after the create and the session's two messages, a batch of 8
// ls calls runs 3 (the request's token and two more) and refuses 5, each
// an isError result naming the rate limit and audited as a rate denial.
func TestBatchCallsChargeTheTenantsRate(t *testing.T) {
	mod, auditPath := limited(t, tenant.Quotas{RequestsPerSecond: 0.001, Burst: 6}, nil)
	h := newHarness(t, nil, nil, mod)
	ws := h.create(aliceToken) // one token
	path := "/v1/workspaces/" + ws.ID + "/mcp"
	sid := h.rawSession(aliceToken, path) // two more
	a := h.rawPost(aliceToken, path, sid, toolBatch(8, "ls", map[string]any{}))
	if a.status != http.StatusOK {
		t.Fatalf("batch: %d %s", a.status, a.body)
	}
	ran, refused := 0, 0
	for _, r := range responses(t, a) {
		switch {
		case r.Result != nil && !r.Result.IsError:
			ran++
		case r.Result != nil && strings.Contains(r.text(), "Blocked by rate limit"):
			refused++
		default:
			t.Fatalf("call %s: %+v %s", r.ID, r.Result, r.text())
		}
	}
	if ran != 3 || refused != 5 {
		t.Fatalf("%d calls ran and %d were refused, want 3 and 5", ran, refused)
	}
	denied, ids := 0, map[string]bool{}
	for _, ev := range records(t, auditPath) {
		if ev.Tool == "ls" {
			if ids[ev.AuditID] {
				t.Errorf("two tool records share audit id %s", ev.AuditID)
			}
			ids[ev.AuditID] = true
			if ev.Decision == "deny" && ev.Rule == "rate" {
				denied++
			}
		}
	}
	if denied != 5 {
		t.Fatalf("%d rate denials audited, want 5", denied)
	}
}

// TestBatchCapRefusesLongBatches: a batch longer than the broker's batch
// cap (MaxBatchCalls, here 4) is refused whole, 400 with a JSON-RPC
// Invalid Request error naming the cap, and none of its calls runs, also
// after much white space; so is a batch that reuses a request id. A batch
// at the cap runs.
func TestBatchCapRefusesLongBatches(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *broker.Config) { c.MaxBatchCalls = 4 })
	ws := h.create(aliceToken)
	for _, path := range []string{"/v1/workspaces/" + ws.ID + "/mcp", "/v1/mcp"} {
		t.Run(path, func(t *testing.T) {
			sid := h.rawSession(aliceToken, path)
			mark := map[string]any{"command": "echo x >> ran-" + strconv.Itoa(len(path))}
			for body, want := range map[string]string{
				toolBatch(5, "bash", mark): "at most 4",
				// White space past any peek buffer before the batch.
				strings.Repeat(" ", 70000) + toolBatch(5, "bash", mark):            "at most 4",
				strings.Replace(toolBatch(2, "bash", mark), `"id":2`, `"id":1`, 1): "request id 1 twice",
			} {
				a := h.rawPost(aliceToken, path, sid, body)
				got := responses(t, a)
				if a.status != http.StatusBadRequest || len(got) != 1 || got[0].Error == nil ||
					got[0].Error.Code != -32600 || !strings.Contains(got[0].Error.Message, want) {
					t.Fatalf("batch (want %q): %d %s", want, a.status, a.body)
				}
			}
			a := h.rawPost(aliceToken, path, sid, toolBatch(4, "bash", mark))
			if got := responses(t, a); a.status != http.StatusOK || len(got) != 4 {
				t.Fatalf("a batch at the cap: %d %s", a.status, a.body)
			}
		})
	}
	ran := map[string]int{}
	for _, w := range h.workspaces(aliceToken) {
		for _, n := range []int{len("/v1/workspaces/" + ws.ID + "/mcp"), len("/v1/mcp")} {
			if b, err := os.ReadFile(filepath.Join(w.Root, "ran-"+strconv.Itoa(n))); err == nil {
				ran[w.ID+"/"+strconv.Itoa(n)] = strings.Count(string(b), "x")
			}
		}
	}
	if len(ran) != 2 {
		t.Fatalf("calls ran in %v, want the batch at the cap's in each endpoint's workspace", ran)
	}
	for where, n := range ran {
		if n != 4 {
			t.Fatalf("%s: %d calls ran, want only the 4 of the batch at the cap", where, n)
		}
	}
}

// TestForeignSessionIsUnknown: another tenant's session id, and the same
// tenant's session id on another endpoint, are answered exactly as a
// random id is (404, same body), for POST, GET and DELETE, and audited as
// tenant denials; the session stays its owner's.
func TestForeignSessionIsUnknown(t *testing.T) {
	mod, auditPath := limited(t, tenant.Quotas{}, nil)
	h := newHarness(t, nil, nil, mod)
	ws, other := h.create(aliceToken), h.create(aliceToken)
	wsPath, otherPath := "/v1/workspaces/"+ws.ID+"/mcp", "/v1/workspaces/"+other.ID+"/mcp"
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tc := range []struct{ name, open, token, use string }{
		{"bob on /v1/mcp", "/v1/mcp", bobToken, "/v1/mcp"},
		{"bob on alice's workspace endpoint", wsPath, bobToken, otherPath},
		{"alice on another workspace's endpoint", wsPath, aliceToken, otherPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.token == bobToken && tc.use != "/v1/mcp" {
				tc.use = "/v1/workspaces/" + h.create(bobToken).ID + "/mcp"
			}
			sid := h.rawSession(aliceToken, tc.open)
			for _, method := range []string{"POST", "GET", "DELETE"} {
				body := ""
				if method == "POST" {
					body = list
				}
				foreign := h.rawDo(tc.token, method, tc.use, sid, body)
				random := h.rawDo(tc.token, method, tc.use, "0123456789ABCDEFGHIJKLMNOP", body)
				if foreign.status != http.StatusNotFound || foreign.status != random.status ||
					foreign.ctype != random.ctype || !bytes.Equal(foreign.body, random.body) {
					t.Errorf("%s with another's session: %d %q %s; with a random id: %d %q %s", method,
						foreign.status, foreign.ctype, foreign.body, random.status, random.ctype, random.body)
				}
			}
			if a := h.rawPost(aliceToken, tc.open, sid, list); a.status != http.StatusOK || !strings.Contains(string(a.body), `"bash"`) {
				t.Fatalf("alice lost her session: %d %s", a.status, a.body)
			}
		})
	}
	denied := 0
	for _, ev := range records(t, auditPath) {
		if ev.Decision == "deny" && ev.Rule == "tenant" && ev.Result != nil && ev.Result.Status == http.StatusNotFound &&
			strings.HasSuffix(ev.Route, "/mcp") {
			denied++
		}
	}
	if denied != 9 {
		t.Fatalf("%d requests on another's session audited as tenant denials, want 9", denied)
	}
}

// TestBatchManagementCallsChargeTheRate: the workspace_* tools of /v1/mcp
// count too: with a burst of 4, after the session's two messages, a batch
// of 5 workspace_list calls runs 2 and refuses 3 naming the rate limit,
// and the batch's request is audited as a rate denial.
func TestBatchManagementCallsChargeTheRate(t *testing.T) {
	mod, auditPath := limited(t, tenant.Quotas{RequestsPerSecond: 0.001, Burst: 4}, nil)
	h := newHarness(t, nil, nil, mod)
	sid := h.rawSession(aliceToken, "/v1/mcp")
	a := h.rawPost(aliceToken, "/v1/mcp", sid, toolBatch(5, "workspace_list", map[string]any{}))
	if a.status != http.StatusOK {
		t.Fatalf("batch: %d %s", a.status, a.body)
	}
	ran, refused := 0, 0
	for _, r := range responses(t, a) {
		switch {
		case r.Result != nil && !r.Result.IsError:
			ran++
		case r.Result != nil && strings.Contains(r.text(), "Blocked by rate limit"):
			refused++
		default:
			t.Fatalf("call %s: %+v %s", r.ID, r.Result, r.text())
		}
	}
	if ran != 2 || refused != 3 {
		t.Fatalf("%d calls ran and %d were refused, want 2 and 3", ran, refused)
	}
	denied := 0
	for _, ev := range records(t, auditPath) {
		if ev.Route == "/v1/mcp" && ev.Verb == "POST" && ev.Decision == "deny" && ev.Rule == "rate" {
			denied++
		}
	}
	if denied != 1 {
		t.Fatalf("%d batch requests audited as rate denials, want 1", denied)
	}
}
