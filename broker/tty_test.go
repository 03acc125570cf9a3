package broker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsbroker/wsbroker/wire"
)

// dialTTY opens a terminal session on ws.
func dialTTY(t *testing.T, e *env, ws wire.WorkspaceInfo, query string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, e.hs.URL+"/v1/workspaces/"+ws.ID+"/exec/tty?"+query,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dialing the terminal: %v (%v)", err, resp)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	return conn
}

// readUntil reads output messages until out holds want; it returns the
// output and the session's last text message when one came first.
func readUntil(t *testing.T, conn *websocket.Conn, want string) (string, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %q (got %q): %v", want, out.String(), err)
		}
		if typ == websocket.MessageText {
			var last map[string]any
			_ = json.Unmarshal(data, &last)
			return out.String(), last
		}
		out.Write(data)
	}
	return out.String(), nil
}

// TestTTYSessionOverWebSocket: an interactive bash on a terminal, typed
// at and read from over the WebSocket, ends with its exit line.
func TestTTYSessionOverWebSocket(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	conn := dialTTY(t, e, ws, "command=bash+--norc+--noprofile+-i&env=PS1%3D%24+&rows=40&cols=120")
	ctx := context.Background()
	readUntil(t, conn, "$ ")
	for _, line := range []string{"stty size; echo hi-$((1+1))\r", "exit 3\r"} {
		if err := conn.Write(ctx, websocket.MessageBinary, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	out, last := readUntil(t, conn, "\x00never")
	if !strings.Contains(out, "40 120") || !strings.Contains(out, "hi-2") {
		t.Fatalf("terminal output %q", out)
	}
	if last["type"] != "exit" || last["exitCode"] != float64(3) {
		t.Fatalf("last message %v", last)
	}
}

// TestTTYClientGoneKillsTheTree: closing the session's connection kills
// the command's tree, as a dropped exec stream does.
func TestTTYClientGoneKillsTheTree(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	conn := dialTTY(t, e, ws, "command=echo+%24%24+%3E+pid%3B+sleep+600")
	waitUntil(t, "the shell's pid", func() bool { return strings.TrimSpace(readHostOr(ws, "pid")) != "" })
	pid := strings.TrimSpace(readHostOr(ws, "pid"))
	_ = conn.CloseNow()
	waitUntil(t, "the shell to be killed", func() bool {
		_, err := os.Stat("/proc/" + pid)
		return os.IsNotExist(err)
	})
}

// TestTTYRequestsAreChecked: sizes out of range are 400 before any
// upgrade; a control message that is not a resize ends the session.
func TestTTYRequestsAreChecked(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	for _, q := range []string{"command=true&rows=0", "command=true&cols=1001", "command=true&rows=x", "command=&rows=10", "command=true&nope=1"} {
		e.problem(http.StatusBadRequest, "invalid", "GET", "/v1/workspaces/"+ws.ID+"/exec/tty?"+q, nil)
	}
	conn := dialTTY(t, e, ws, "command=sleep+30")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Write(ctx, websocket.MessageText, []byte(`{"type":"explode"}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := conn.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
				t.Fatalf("after a bad control message: %v", err)
			}
			return
		}
	}
}
