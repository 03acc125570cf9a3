//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/wire"
)

// jsonRoutes are every route that takes a JSON body, with a valid body
// for each.
func jsonRoutes(ws wire.WorkspaceInfo) map[string]string {
	w := "/v1/workspaces/" + ws.ID
	return map[string]string{
		"/v1/workspaces": `{"backend":"local"}`,
		w + "/glob":      `{"pattern":"*"}`,
		w + "/search":    `{"pattern":"x"}`,
		w + "/exec":      `{"command":"true"}`,
		w + "/tools/ls":  `{"path":"."}`,
		w + "/tools":     `{"calls":[{"name":"ls","arguments":{"path":"."}}]}`,
		w + "/mcp":       `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"/v1/mcp":        `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
	}
}

// TestJSONNestingIsBounded: a body nested past broker.MaxJSONDepth is a
// 400 naming the limit on every JSON route, and checking a 40 KB body of
// '[' costs memory linear in its size (a path string per level made it
// quadratic).
func TestJSONNestingIsBounded(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	deep := strings.Repeat("[", 40<<10)
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	for route := range jsonRoutes(ws) {
		for _, body := range []string{deep, nested(broker.MaxJSONDepth + 1), `{"a":` + nested(broker.MaxJSONDepth) + `}`} {
			p := e.problem(http.StatusBadRequest, "bad_request", "POST", route, body)
			if !strings.Contains(p.Detail, fmt.Sprintf("deeper than %d levels", broker.MaxJSONDepth)) {
				t.Errorf("POST %s: detail %q does not name the depth limit", route, p.Detail)
			}
		}
	}
	// At the limit the body is JSON like any other: the tool says what is
	// wrong with its arguments.
	resp, data := e.do("POST", "/v1/workspaces/"+ws.ID+"/tools/ls", `{"path":`+nested(broker.MaxJSONDepth-1)+`}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"isError":true`) {
		t.Fatalf("%d levels: %d %s", broker.MaxJSONDepth, resp.StatusCode, data)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	e.problem(http.StatusBadRequest, "bad_request", "POST", "/v1/workspaces/"+ws.ID+"/tools/ls", body)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
		t.Errorf("checking a %d-byte body allocated %d bytes", len(body), grew)
	}
}

// TestKeysDifferingOnlyInCaseAreRefused: encoding/json would run one of
// two keys that differ only in case while the audit and the policy read
// the other; every JSON route refuses both spellings, and exact
// duplicates, before anything runs.
func TestKeysDifferingOnlyInCaseAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	w := "/v1/workspaces/" + ws.ID
	cases := map[string]string{
		"/v1/workspaces":   `{"backend":"local","Backend":"docker"}`,
		w + "/glob":        `{"pattern":"*","PATTERN":"x"}`,
		w + "/search":      `{"pattern":"x","Pattern":"y"}`,
		w + "/exec":        `{"command":"touch ran-exec","Command":"true"}`,
		w + "/tools/bash":  `{"command":"touch ran-tool","Command":"ls -la"}`,
		w + "/tools/write": `{"path":"a.txt","Path":"b.txt","content":"x"}`,
		w + "/tools/edit":  `{"path":"a.txt","edits":[],"edit\u017f":[]}`, // ſ folds to s, as encoding/json matches it
		w + "/tools":       `{"calls":[{"name":"bash","arguments":{"command":"touch ran-batch","COMMAND":"ls"}}]}`,
		w + "/mcp":         `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"initialize"}`,
		"/v1/mcp":          `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{},"Params":{}}`,
	}
	for route, body := range cases {
		p := e.problem(http.StatusBadRequest, "bad_request", "POST", route, body)
		if !strings.Contains(p.Detail, "differ only in case") {
			t.Errorf("POST %s: detail %q", route, p.Detail)
		}
	}
	for route, body := range jsonRoutes(ws) {
		dup := strings.Replace(body, "{", `{"x":1,"x":2,`, 1)
		p := e.problem(http.StatusBadRequest, "bad_request", "POST", route, dup)
		if !strings.Contains(p.Detail, `duplicate key "x"`) {
			t.Errorf("POST %s: detail %q", route, p.Detail)
		}
	}
	for _, f := range []string{"ran-exec", "ran-tool", "ran-batch", "a.txt", "b.txt"} {
		if _, err := statHost(ws, f); err == nil {
			t.Errorf("%s exists: a refused call ran", f)
		}
	}
	// One spelling alone is fine.
	e.must(http.StatusOK, "POST", w+"/tools/bash", bytes.NewReader([]byte(`{"command":"true"}`)), nil)
}
