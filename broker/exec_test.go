//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// execLine is the union of the exec stream's lines, as a client reads them.
type execLine struct {
	Type   string `json:"type"`
	Data   []byte `json:"data"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	opsapi.ExecResult
}

// readExec decodes an exec stream, checking every line's size, and
// returns the output and the last line.
func readExec(t testing.TB, r io.Reader, onOutput func([]byte)) ([]byte, execLine) {
	t.Helper()
	sc := bufio.NewScanner(r) // the default 64 KiB line limit must suffice
	var out bytes.Buffer
	var last execLine
	for sc.Scan() {
		var l execLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if last.Type == "exit" || last.Type == "error" {
			t.Fatalf("line after the %s line: %s", last.Type, sc.Text())
		}
		if l.Type == "output" {
			out.Write(l.Data)
			if onOutput != nil {
				onOutput(out.Bytes())
			}
		}
		last = l
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the exec stream: %v", err)
	}
	return out.Bytes(), last
}

func (e *env) exec(ws wire.WorkspaceInfo, body any) ([]byte, execLine) {
	e.t.Helper()
	resp := e.send(e.request("POST", "/v1/workspaces/"+ws.ID+"/exec", body))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("exec: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return readExec(e.t, resp.Body, nil)
}

func TestExec(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()

	out, last := e.exec(ws, map[string]any{"command": `printf 'a\0b\n'; echo out; echo err >&2; exit 3`})
	if !bytes.Contains(out, []byte("a\x00b\n")) || !bytes.Contains(out, []byte("out\n")) || !bytes.Contains(out, []byte("err\n")) {
		t.Errorf("output %q", out)
	}
	if last.Type != "exit" || last.ExitCode != 3 || last.TimedOut || last.Canceled || last.Duration <= 0 {
		t.Errorf("exit line %+v", last)
	}

	if err := os.Mkdir(hostPath(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, last = e.exec(ws, map[string]any{"command": `echo "$FOO"; pwd`, "env": []string{"FOO=bar baz"}, "cwd": "sub"})
	if string(out) != "bar baz\n"+ws.Root+"/sub\n" || last.ExitCode != 0 {
		t.Errorf("env/cwd output %q, exit %+v", out, last)
	}

	// Large output arrives whole, in lines a default scanner can read.
	out, last = e.exec(ws, map[string]any{"command": `head -c 300000 /dev/zero | tr '\0' x`})
	if len(out) != 300000 || strings.Trim(string(out), "x") != "" || last.ExitCode != 0 {
		t.Errorf("large output: %d bytes, exit %+v", len(out), last)
	}

	// The deadline kills the command; it is a result, not an error.
	_, last = e.exec(ws, map[string]any{"command": "sleep 30", "timeout": 0.5})
	if last.Type != "exit" || !last.TimedOut {
		t.Errorf("timeout exit line %+v", last)
	}
	// The largest timeout is accepted.
	_, last = e.exec(ws, map[string]any{"command": "true", "timeout": broker.MaxExecTimeout})
	if last.Type != "exit" || last.ExitCode != 0 {
		t.Errorf("max timeout %+v", last)
	}

	// A command that cannot start is a problem, not a stream.
	e.problem(http.StatusNotFound, "not_exist", "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": "true", "cwd": "missing"})
	e.problem(http.StatusForbidden, "permission", "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": "true", "cwd": "../.."})
	e.problem(http.StatusNotFound, "not_found", "POST", "/v1/workspaces/ws_nope/exec", map[string]any{"command": "true"})
}

// TestExecBadInput: every malformed request is a field-specific 4xx and
// runs nothing (each command would create the file "ran").
func TestExecBadInput(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	cases := []struct {
		name, body, code, detail, golden string
	}{
		{"empty command", `{"command":""}`, "invalid", `exec: field "command" is empty`, ""},
		{"blank command", `{"command":" \n\t"}`, "invalid", `exec: field "command" is empty`, ""},
		{"no command", `{"cwd":"."}`, "invalid", `exec: field "command" is empty`, ""},
		{"negative timeout", `{"command":"touch ran","timeout":-1}`, "invalid", `exec: field "timeout" must be a number of seconds from 0 to 2147483.647, got -1`, "problem_exec_timeout"},
		{"huge timeout", `{"command":"touch ran","timeout":1e12}`, "invalid", `exec: field "timeout" must be a number of seconds from 0 to 2147483.647, got 1000000000000`, ""},
		{"overflowing timeout", `{"command":"touch ran","timeout":1e400}`, "bad_request", `bad request: field "timeout": expected number, got JSON number 1e400 at offset 38`, ""},
		{"string timeout", `{"command":"touch ran","timeout":"5"}`, "bad_request", `bad request: field "timeout": expected number, got JSON string at offset 36`, ""},
		{"NUL in command", `{"command":"touch ran\u0000x"}`, "invalid", `exec: field "command" contains a NUL byte`, ""},
		{"NUL in cwd", `{"command":"touch ran","cwd":"a\u0000"}`, "invalid", `exec: field "cwd" contains a NUL byte`, ""},
		{"NUL in env", `{"command":"touch ran","env":["A=\u0000"]}`, "invalid", `exec: field "env[0]" contains a NUL byte`, ""},
		{"env without =", `{"command":"touch ran","env":["NOEQUALS"]}`, "invalid", `exec: field "env[0]" must be KEY=VALUE, got "NOEQUALS"`, ""},
		{"env empty key", `{"command":"touch ran","env":["=x"]}`, "invalid", `exec: field "env[0]" must be KEY=VALUE, got "=x"`, ""},
		{"unknown field", `{"command":"touch ran","argv":["x"]}`, "bad_request", `bad request: unknown field "argv"`, "problem_unknown_field"},
		{"wrong type", `{"command":["touch","ran"]}`, "bad_request", `bad request: field "command": expected string, got JSON array at offset 12`, ""},
		{"duplicate key", `{"command":"true","command":"touch ran"}`, "bad_request", `bad request: duplicate key "command" in the top-level object at offset 18`, "problem_duplicate_key"},
		{"nested duplicate", `{"command":"touch ran","env":[],"x":{"a":1,"a":2}}`, "bad_request", `bad request: duplicate key "a" in x at offset 43`, ""},
		{"trailing data", `{"command":"touch ran"} {"command":"true"}`, "bad_request", `bad request: unexpected data after the JSON value at offset 23`, ""},
		{"malformed", `{"command":"touch ran"`, "bad_request", `bad request: malformed JSON at offset 22: unexpected end of input`, ""},
		{"bad token", `{"command":touch}`, "bad_request", `bad request: malformed JSON at offset 11: invalid character 'o' in literal true (expecting 'r')`, "problem_malformed_json"},
		{"empty body", ``, "bad_request", `bad request: request body is empty; expected JSON`, ""},
		{"not an object", `"touch ran"`, "bad_request", `bad request: body: expected object, got JSON string at offset 11`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, data := e.do("POST", "/v1/workspaces/"+ws.ID+"/exec", c.body)
			status := http.StatusBadRequest
			p := checkProblem(t, resp, data, status, c.code)
			if p.Detail != c.detail {
				t.Errorf("detail\n got %s\nwant %s", p.Detail, c.detail)
			}
			if c.golden != "" {
				golden(t, c.golden, data)
			}
		})
	}
	if _, err := statHost(ws, "ran"); err == nil {
		t.Fatal("a refused exec ran")
	}
}

// marker makes a command line no other process has, so the test can find
// the command's processes in /proc whatever pid namespace they live in.
func marker() string {
	return fmt.Sprintf("%d.%06d", 4000+time.Now().UnixNano()%1000, time.Now().Nanosecond()/1000)
}

// alive reports whether a process whose command line contains m exists
// (zombies have an empty command line and do not count).
func alive(t testing.TB, m string) bool {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(m)) {
			return true
		}
	}
	return false
}

func waitGone(t testing.TB, m string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(t, m) {
		if time.Now().After(deadline) {
			t.Fatalf("process %q still runs 5s after its call ended", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSleeper starts an exec whose background child writes its pid file
// and then outlives the shell's output; it returns once the child runs.
func (e *env) startSleeper(ctx context.Context, ws wire.WorkspaceInfo, m string) (*http.Response, int) {
	e.t.Helper()
	req := e.request("POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{
		"command": "sleep " + m + " & echo $! > sleep.pid; echo started; wait",
	})
	resp, err := e.hs.Client().Do(req.WithContext(ctx))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("exec: %d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadBytes('\n')
	if err != nil {
		e.t.Fatalf("first line: %v", err)
	}
	var l execLine
	if err := json.Unmarshal(line, &l); err != nil || l.Type != "output" || !bytes.Contains(l.Data, []byte("started")) {
		e.t.Fatalf("first line %s (%v)", line, err)
	}
	var pid int
	if _, err := fmt.Sscan(readHost(e.t, ws, "sleep.pid"), &pid); err != nil || pid <= 0 {
		e.t.Fatalf("pid file: %v", err)
	}
	if !alive(e.t, m) {
		e.t.Fatalf("sleeper %s (pid %d) is not running", m, pid)
	}
	resp.Body = io.NopCloser(io.MultiReader(br, resp.Body))
	return resp, pid
}

// TestExecClientDisconnectKillsTree: when the client goes away, the
// command's whole tree dies, background children included.
func TestExecClientDisconnectKillsTree(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	m := marker()
	ctx, cancel := context.WithCancel(context.Background())
	_, pid := e.startSleeper(ctx, ws, m)
	cancel()
	waitGone(t, m)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte(m)) {
		t.Errorf("pid %d still runs the sleeper", pid)
	}
	// The call's resources are released: no command is counted as running.
	deadline := time.Now().Add(5 * time.Second)
	for {
		text := e.metricsText(t)
		if strings.Contains(text, "\nwsbroker_running_commands 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("running commands not back to 0:\n%s", grepLines(text, "running"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShutdownKillsCommands: Shutdown cancels running commands, waits for
// them, and refuses new ones; the workspace itself stays.
func TestShutdownKillsCommands(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	m := marker()
	resp, _ := e.startSleeper(context.Background(), ws, m)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_, last := readExec(t, resp.Body, nil)
	if last.Type != "exit" || !last.Canceled {
		t.Errorf("last line after Shutdown %+v", last)
	}
	waitGone(t, m)
	e.problem(http.StatusServiceUnavailable, "unavailable", "POST", "/v1/workspaces/"+ws.ID+"/exec", map[string]any{"command": "touch ran"})
	if _, err := os.Stat(ws.Root); err != nil {
		t.Errorf("Shutdown destroyed the workspace: %v", err)
	}
	if _, err := statHost(ws, "ran"); err == nil {
		t.Error("a command ran after Shutdown")
	}
}

// TestDeleteKillsCommands: deleting a workspace ends its running commands
// before the sandbox goes.
func TestDeleteKillsCommands(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	m := marker()
	resp, _ := e.startSleeper(context.Background(), ws, m)
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	_, last := readExec(t, resp.Body, nil)
	if last.Type != "exit" && last.Type != "error" {
		t.Errorf("last line after DELETE %+v", last)
	}
	waitGone(t, m)
}

// TestToolCallDisconnectKillsTree: the bash tool's command dies with its
// client too.
func TestToolCallDisconnectKillsTree(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	m := marker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := e.request("POST", "/v1/workspaces/"+ws.ID+"/tools/bash", map[string]any{
		"command": "sleep " + m + " & echo $! > sleep.pid; echo started; wait",
	})
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := e.hs.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	started := false
	for !started && sc.Scan() {
		var l wire.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		started = l.Type == "update" && strings.Contains(resultText(l.Result), "started")
	}
	if !started || !alive(t, m) {
		t.Fatalf("the command did not start (%v)", sc.Err())
	}
	cancel()
	waitGone(t, m)
}

// TestUploadInterrupted: a client that goes away mid-upload leaves the old
// file as it was.
func TestUploadInterrupted(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	writeHost(t, ws, "keep.txt", "old content")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request("PUT", wsPath(ws, "/files", "keep.txt"), pr).WithContext(ctx)
	done := make(chan error, 1)
	go func() {
		resp, err := e.hs.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if _, err := pw.Write(bytes.Repeat([]byte("new"), 100000)); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = pw.CloseWithError(context.Canceled)
	if err := <-done; err == nil {
		t.Fatal("the interrupted upload succeeded")
	}
	// Wait until the server has finished with the request (it is counted
	// once its handler returns): the file must be the old one.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.metricsText(t), `method="PUT",route="/v1/workspaces/{id}/files"`) {
		if time.Now().After(deadline) {
			t.Fatal("the interrupted upload's handler has not returned after 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := readHost(t, ws, "keep.txt"); got != "old content" {
		t.Fatalf("file is %d bytes after an interrupted upload", len(got))
	}
}

func (e *env) metricsText(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(e.hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
