//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/wire"
)

func resultText(r tools.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestToolList(t *testing.T) {
	e := newEnv(t, nil)
	var list wire.ToolList
	e.must(http.StatusOK, "GET", "/v1/tools", nil, &list)
	var names []string
	for _, d := range list.Tools {
		names = append(names, d.Name)
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("tool %s parameters %s: %v", d.Name, d.Parameters, err)
		}
		if d.Description == "" {
			t.Errorf("tool %s has no description", d.Name)
		}
	}
	if got, want := strings.Join(names, ","), strings.Join(tools.Names(), ","); got != want {
		t.Errorf("tools %s, want %s", got, want)
	}
}

func TestToolCall(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	base := "/v1/workspaces/" + ws.ID + "/tools/"

	var res tools.Result
	data := e.must(http.StatusOK, "POST", base+"write", map[string]any{"path": "dir/a.txt", "content": "hello\nworld\n"}, &res)
	golden(t, "tool_write_result", data)
	if res.IsError || readHost(t, ws, "dir/a.txt") != "hello\nworld\n" {
		t.Fatalf("write: %+v", res)
	}
	e.must(http.StatusOK, "POST", base+"read", map[string]any{"path": "dir/a.txt"}, &res)
	if res.IsError || !strings.Contains(resultText(res), "hello\nworld") {
		t.Fatalf("read: %+v", res)
	}
	e.must(http.StatusOK, "POST", base+"edit", map[string]any{"path": "dir/a.txt", "edits": []map[string]string{{"oldText": "world", "newText": "there"}}}, &res)
	if res.IsError || readHost(t, ws, "dir/a.txt") != "hello\nthere\n" {
		t.Fatalf("edit: %+v, file %q", res, readHost(t, ws, "dir/a.txt"))
	}

	// A tool failure is a 200 the model can read.
	e.must(http.StatusOK, "POST", base+"read", map[string]any{"path": "missing.txt"}, &res)
	if !res.IsError || resultText(res) == "" {
		t.Fatalf("read missing: %+v", res)
	}
	// So are arguments that fail validation, with pi's text.
	e.must(http.StatusOK, "POST", base+"write", map[string]any{"content": "x"}, &res)
	if !res.IsError || !strings.HasPrefix(resultText(res), `Validation failed for tool "write"`) {
		t.Fatalf("invalid args: %+v", res)
	}
	e.must(http.StatusOK, "POST", base+"read", `[1,2]`, &res)
	if !res.IsError {
		t.Fatalf("array args: %+v", res)
	}

	// Only non-JSON bodies, unknown tools and unknown workspaces are 4xx.
	p := e.problem(http.StatusBadRequest, "bad_request", "POST", base+"read", `{"path":`)
	if !strings.Contains(p.Detail, "offset") {
		t.Errorf("malformed JSON detail %q names no offset", p.Detail)
	}
	e.problem(http.StatusBadRequest, "bad_request", "POST", base+"read", `not json`)
	e.problem(http.StatusBadRequest, "bad_request", "POST", base+"read", ``)
	e.problem(http.StatusBadRequest, "bad_request", "POST", base+"bash", `{"command":"touch ran","command":"true"}`)
	e.problem(http.StatusNotFound, "not_found", "POST", base+"nope", map[string]any{})
	e.problem(http.StatusNotFound, "not_found", "POST", "/v1/workspaces/ws_nope/tools/read", map[string]any{"path": "a"})
	if _, err := statHost(ws, "ran"); err == nil {
		t.Error("a refused bash call ran")
	}
}

// TestToolCallStreaming proves updates reach the client while the command
// still runs: the command waits for a file the test creates only after it
// has seen the first update.
func TestToolCallStreaming(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	req := e.request("POST", "/v1/workspaces/"+ws.ID+"/tools/bash", map[string]any{
		"command": "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second",
		"timeout": 30,
	})
	req.Header.Set("Accept", "application/x-ndjson")
	resp := e.send(req)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var lines []wire.StreamLine
	released := false
	for sc.Scan() {
		var l wire.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
		if !released && l.Type == "update" && strings.Contains(resultText(l.Result), "first") {
			released = true
			if err := os.WriteFile(hostPath(ws, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !released {
		t.Fatalf("no update carried the first output; lines %+v", lines)
	}
	last := lines[len(lines)-1]
	if last.Type != "result" || last.Result.IsError || !strings.Contains(resultText(last.Result), "first\nsecond") {
		t.Fatalf("last line %+v", last)
	}
	for _, l := range lines[:len(lines)-1] {
		if l.Type != "update" {
			t.Errorf("line before the last has type %q", l.Type)
		}
	}

	// A non-streaming tool streams just its result.
	req = e.request("POST", "/v1/workspaces/"+ws.ID+"/tools/read", map[string]any{"path": "nope"})
	req.Header.Set("Accept", "application/json, application/x-ndjson")
	resp = e.send(req)
	var only wire.StreamLine
	if err := json.NewDecoder(resp.Body).Decode(&only); err != nil || only.Type != "result" || !only.Result.IsError {
		t.Fatalf("read stream: %+v %v", only, err)
	}
}

func TestBatch(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	path := "/v1/workspaces/" + ws.ID + "/tools"

	// Parallel calls overlap: each waits for the other's marker, which only
	// works when both run at once. An unknown tool and invalid arguments
	// fail alone.
	var out wire.BatchResponse
	e.must(http.StatusOK, "POST", path, map[string]any{
		"mode": "parallel",
		"calls": []map[string]any{
			{"id": "c1", "name": "bash", "arguments": map[string]any{"command": "touch a; while [ ! -e b ]; do sleep 0.05; done; echo one", "timeout": 30}},
			{"id": "c2", "name": "nope", "arguments": map[string]any{}},
			{"id": "c3", "name": "read", "arguments": map[string]any{}},
			{"id": "c4", "name": "bash", "arguments": map[string]any{"command": "touch b; while [ ! -e a ]; do sleep 0.05; done; echo two", "timeout": 30}},
		},
	}, &out)
	if len(out.Results) != 4 {
		t.Fatalf("results %+v", out)
	}
	for i, id := range []string{"c1", "c2", "c3", "c4"} {
		if out.Results[i].ID != id {
			t.Errorf("result %d has id %q, want %q", i, out.Results[i].ID, id)
		}
	}
	if r := out.Results[0].Result; r.IsError || !strings.Contains(resultText(r), "one") {
		t.Errorf("c1 %+v", r)
	}
	if r := out.Results[1].Result; !r.IsError || resultText(r) != "Tool nope not found" {
		t.Errorf("c2 %+v", r)
	}
	if r := out.Results[2].Result; !r.IsError || !strings.HasPrefix(resultText(r), `Validation failed for tool "read"`) {
		t.Errorf("c3 %+v", r)
	}
	if r := out.Results[3].Result; r.IsError || !strings.Contains(resultText(r), "two") {
		t.Errorf("c4 %+v", r)
	}

	// Sequential calls see each other's effects in order; missing
	// arguments mean {}.
	e.must(http.StatusOK, "POST", path, map[string]any{
		"mode": "sequential",
		"calls": []map[string]any{
			{"id": "w", "name": "write", "arguments": map[string]any{"path": "s.txt", "content": "v1"}},
			{"id": "b", "name": "bash", "arguments": map[string]any{"command": "cat s.txt; echo -n v2 > s.txt"}},
			{"id": "r", "name": "read", "arguments": map[string]any{"path": "s.txt"}},
			{"id": "n", "name": "ls"},
		},
	}, &out)
	if len(out.Results) != 4 || !strings.Contains(resultText(out.Results[1].Result), "v1") ||
		!strings.Contains(resultText(out.Results[2].Result), "v2") || out.Results[3].Result.IsError {
		t.Fatalf("sequential %+v", out)
	}

	e.problem(http.StatusBadRequest, "bad_request", "POST", path, map[string]any{"mode": "random", "calls": []any{}})
	e.problem(http.StatusBadRequest, "bad_request", "POST", path, map[string]any{"calls": []any{map[string]any{"name": "ls", "args": map[string]any{}}}})
	e.problem(http.StatusBadRequest, "bad_request", "POST", path, map[string]any{"calls": "ls"})
	many := make([]map[string]any, broker.DefaultMaxBatchCalls+1)
	for i := range many {
		many[i] = map[string]any{"name": "ls"}
	}
	e.problem(http.StatusBadRequest, "bad_request", "POST", path, map[string]any{"calls": many})
	e.must(http.StatusOK, "POST", path, map[string]any{"calls": []any{}}, &out)
	if out.Results == nil || len(out.Results) != 0 {
		t.Errorf("empty batch %+v", out)
	}
}

// TestBashAfterShutdownIsUnavailable: once the service shuts down, a bash
// call, streamed or not, and a batch holding one are 503 problems and do
// not run (RunTool and RunBatch refuse them before anything is written);
// a batch without bash still runs.
func TestBashAfterShutdownIsUnavailable(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.srv.Service().Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	base := "/v1/workspaces/" + ws.ID + "/tools"
	e.problem(http.StatusServiceUnavailable, "unavailable", "POST", base+"/bash", map[string]any{"command": "touch ran"})
	req := e.request("POST", base+"/bash", map[string]any{"command": "touch ran"})
	req.Header.Set("Accept", "application/x-ndjson")
	resp := e.send(req)
	data, _ := io.ReadAll(resp.Body)
	checkProblem(t, resp, data, http.StatusServiceUnavailable, "unavailable")
	e.problem(http.StatusServiceUnavailable, "unavailable", "POST", base, map[string]any{"calls": []map[string]any{
		{"id": "1", "name": "write", "arguments": map[string]any{"path": "b.txt", "content": "b"}},
		{"id": "2", "name": "bash", "arguments": map[string]any{"command": "touch ran"}},
	}})
	for _, f := range []string{"ran", "b.txt"} {
		if _, err := statHost(ws, f); err == nil {
			t.Errorf("%s: a call ran after Shutdown", f)
		}
	}
	var out wire.BatchResponse
	e.must(http.StatusOK, "POST", base, map[string]any{"calls": []map[string]any{
		{"id": "1", "name": "write", "arguments": map[string]any{"path": "b.txt", "content": "b"}},
	}}, &out)
	if len(out.Results) != 1 || out.Results[0].Result.IsError {
		t.Fatalf("a batch without bash after Shutdown: %+v", out)
	}
}
