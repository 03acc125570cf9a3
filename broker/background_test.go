package broker_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/wire"
)

// sleepers counts the host's processes whose command line is `sleep mark`.
func sleepers(t *testing.T, mark string) int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, f := range dirs {
		if b, err := os.ReadFile(f); err == nil && string(b) == "sleep\x00"+mark+"\x00" {
			n++
		}
	}
	return n
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestDeletingAWorkspaceKillsItsBackgroundProcessesAndLogs: nothing of a
// background process outlives its workspace, on the host or in the
// broker's process directory.
func TestDeletingAWorkspaceKillsItsBackgroundProcessesAndLogs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "processes")
	e := newEnv(t, func(c *broker.Config) { c.ProcessDir = dir })
	ws := e.workspace()
	mark := fmt.Sprint(800000 + time.Now().UnixNano()%99999)
	var p wire.BackgroundProcess
	e.must(http.StatusCreated, "POST", "/v1/workspaces/"+ws.ID+"/processes",
		map[string]any{"command": "sleep " + mark + " & env -i setsid sleep " + mark + " & wait"}, &p)
	waitUntil(t, "the two sleeps", func() bool { return sleepers(t, mark) == 2 })
	logs, _ := filepath.Glob(filepath.Join(dir, ws.ID, "*.log"))
	if len(logs) != 1 {
		t.Fatalf("process logs %v, want one", logs)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	waitUntil(t, "the sleeps to end", func() bool { return sleepers(t, mark) == 0 })
	if _, err := os.Stat(filepath.Join(dir, ws.ID)); !os.IsNotExist(err) {
		t.Fatalf("the workspace's process logs are still there: %v", err)
	}
}

// TestBackgroundRequestsAreChecked: bad starts, offsets, waits and signals
// are 400s with the field named, and nothing starts.
func TestBackgroundRequestsAreChecked(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	base := "/v1/workspaces/" + ws.ID + "/processes"
	for _, body := range []map[string]any{
		{"command": ""},
		{"command": "true", "tag": strings.Repeat("t", 257)},
		{"command": "true", "timeout": -1},
		{"command": "true", "env": []string{"NOEQUALS"}},
	} {
		e.problem(http.StatusBadRequest, "invalid", "POST", base, body)
	}
	e.problem(http.StatusBadRequest, "bad_request", "POST", base, map[string]any{"command": "true", "nope": 1})
	e.problem(http.StatusNotFound, "not_exist", "POST", base, map[string]any{"command": "true", "cwd": "missing"})
	var list wire.ProcessList
	e.must(http.StatusOK, "GET", base, nil, &list)
	if len(list.Background) != 0 {
		t.Fatalf("refused starts left processes: %+v", list.Background)
	}
	var p wire.BackgroundProcess
	e.must(http.StatusCreated, "POST", base, map[string]any{"command": "sleep 30"}, &p)
	e.problem(http.StatusBadRequest, "invalid", "GET", base+"/"+p.ID+"/logs?offset=-1", nil)
	e.problem(http.StatusBadRequest, "invalid", "GET", base+"/"+p.ID+"/wait?timeout=601", nil)
	e.problem(http.StatusBadRequest, "invalid", "POST", base+"/"+p.ID+"/signal", map[string]any{"signal": "SIGSTOP"})
	e.problem(http.StatusBadRequest, "invalid", "POST", base+"/"+p.ID+"/stdin", "no stdin was asked for")
	e.problem(http.StatusNotFound, "not_exist", "GET", base+"/p-0123456789abcdef", nil)
}

// TestExecStdinQueryIsChecked: with stdin in the body the query is the
// request, checked as strictly as a JSON body.
func TestExecStdinQueryIsChecked(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	for _, q := range []string{"command=true&nope=1", "command=true&command=false", "command=", "command=true&timeout=x", "command=true&env=X"} {
		req := e.request("POST", "/v1/workspaces/"+ws.ID+"/exec?"+q, "in")
		req.Header.Set("Content-Type", "application/octet-stream")
		resp := e.send(req)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, resp.StatusCode)
		}
	}
	req := e.request("POST", "/v1/workspaces/"+ws.ID+"/exec?command=tr+a-z+A-Z", "shout\n")
	req.Header.Set("Content-Type", "application/octet-stream")
	resp := e.send(req)
	defer resp.Body.Close()
	out, last := readExec(t, resp.Body, nil)
	if string(out) != "SHOUT\n" || last.ExitCode != 0 {
		t.Fatalf("stdin through the body: %q %+v", out, last)
	}
}

// TestExecStdinBrokenOffKillsTheCommand: a client that dies while sending
// stdin kills the command, which never sees its stdin end (an end would
// let it run on, here to `echo x > done`).
func TestExecStdinBrokenOffKillsTheCommand(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	addr := strings.TrimPrefix(e.hs.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/workspaces/%s/exec?command=%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n",
		ws.ID, "echo+%24%24+%3E+pid%3B+cat+%3E+got%3B+echo+x+%3E+done", addr, testToken)
	// The command writes nothing, so no response comes before the end.
	waitUntil(t, "the input to arrive", func() bool { return readHostOr(ws, "got") == "hello\n" })
	pid := strings.TrimSpace(readHostOr(ws, "pid"))
	_ = conn.(*net.TCPConn).SetLinger(0)
	conn.Close() // mid-body: the chunked body never ends
	waitUntil(t, "the shell to be killed", func() bool {
		_, err := os.Stat("/proc/" + pid)
		return os.IsNotExist(err)
	})
	time.Sleep(200 * time.Millisecond)
	if _, err := statHost(ws, "done"); !os.IsNotExist(err) {
		t.Fatalf("the command went on past its broken stdin: %v", err)
	}
}

func readHostOr(ws wire.WorkspaceInfo, rel string) string {
	b, _ := os.ReadFile(hostPath(ws, rel))
	return string(b)
}

// TestBackgroundProcessUsage: a running process on a backend that can
// measure it (local with cgroups) reports its tree's CPU and memory; an
// ended one reports none.
func TestBackgroundProcessUsage(t *testing.T) {
	testutil.RequireRoot(t) // cgroups
	e := newEnv(t, nil)
	ws := e.workspace()
	base := "/v1/workspaces/" + ws.ID + "/processes"
	var p wire.BackgroundProcess
	// The spinning child is what uses the CPU: the tree is measured.
	e.must(http.StatusCreated, "POST", base, map[string]any{"command": "sh -c 'while :; do :; done' & wait"}, &p)
	waitUntil(t, "CPU time to show", func() bool {
		e.must(http.StatusOK, "GET", base+"/"+p.ID, nil, &p)
		return p.Usage != nil && p.Usage.CPUNs >= int64(200*time.Millisecond) && p.Usage.MemoryBytes > 0
	})
	var ended wire.BackgroundProcess
	e.must(http.StatusOK, "DELETE", base+"/"+p.ID, nil, &ended)
	if ended.State != wire.ProcessExited || ended.Usage != nil {
		t.Fatalf("an ended process reports %s, usage %+v", ended.State, ended.Usage)
	}
}
