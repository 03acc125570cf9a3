package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/wire"
)

const testToken = "test-token-0123456789"

// startBroker serves the real broker with the real local backend on a
// loopback httptest server and returns a client for it.
func startBroker(t *testing.T, cfg broker.Config) (*client.Client, string) {
	t.Helper()
	lb, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = []string{testToken}
	srv, err := broker.New(cfg, map[string]opsapi.Backend{lb.Name(): lb}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
		_ = lb.Close()
	})
	return client.New(ts.URL, testToken, client.WithHTTPClient(ts.Client())), ts.URL
}

// newWorkspace creates a workspace over HTTP, deleted when t ends.
func newWorkspace(t *testing.T, c *client.Client) *client.Workspace {
	t.Helper()
	info, err := c.CreateWorkspace(context.Background(), "local", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := c.WorkspaceFor(info)
	t.Cleanup(func() {
		if err := ws.Destroy(context.Background()); err != nil {
			t.Errorf("destroy %s: %v", info.ID, err)
		}
	})
	return ws
}

func readAll(t *testing.T, ws *client.Workspace, path string) string {
	t.Helper()
	rc, err := ws.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWorkspaceLifecycle(t *testing.T) {
	ctx := context.Background()
	c, _ := startBroker(t, broker.Config{})
	info, err := c.CreateWorkspace(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.ID, "ws_") || info.Backend != "local" || !strings.HasPrefix(info.Root, "/") || info.CreatedAt.IsZero() {
		t.Fatalf("created %+v", info)
	}
	list, err := c.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("list: %+v, %v", list, err)
	}
	got, err := c.GetWorkspace(ctx, info.ID)
	if err != nil || !reflect.DeepEqual(got, info) {
		t.Fatalf("get: %+v, %v; want %+v", got, err, info)
	}
	// A handle made from the id alone fetches its root on first use.
	if root := c.Workspace(info.ID).Root(); root != info.Root {
		t.Fatalf("lazy Root() = %q, want %q", root, info.Root)
	}
	if err := c.DeleteWorkspace(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWorkspace(ctx, info.ID); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("get after delete: %v, want ErrNotExist", err)
	}
	if err := c.DeleteWorkspace(ctx, info.ID); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("second DeleteWorkspace: %v, want ErrNotExist", err)
	}
	// Destroy, the opsapi ability, is idempotent.
	if err := c.Workspace(info.ID).Destroy(ctx); err != nil {
		t.Fatalf("Destroy of a deleted workspace: %v", err)
	}
	if _, err := c.CreateWorkspace(ctx, "nosuchbackend", nil); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("unknown backend: %v, want ErrInvalid", err)
	}
	defs, err := c.Tools(ctx)
	if err != nil || len(defs) != 7 {
		t.Fatalf("Tools: %d definitions, %v", len(defs), err)
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	ctx := context.Background()
	c, url := startBroker(t, broker.Config{})
	ws := newWorkspace(t, c)

	if _, err := ws.Open(ctx, "missing.txt"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("Open missing: %v, want ErrNotExist", err)
	}
	if _, err := ws.Stat(ctx, "../outside"); !errors.Is(err, opsapi.ErrPermission) {
		t.Errorf("Stat outside the root: %v, want ErrPermission", err)
	}
	if err := ws.Mkdir(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile(ctx, "d", strings.NewReader("x")); !errors.Is(err, opsapi.ErrIsDir) {
		t.Errorf("WriteFile on a directory: %v, want ErrIsDir", err)
	}
	var p *wire.Problem
	_, err := ws.Open(ctx, "missing.txt")
	if !errors.As(err, &p) || p.Status != 404 || p.Code != "not_exist" {
		t.Errorf("problem of a missing file: %+v", p)
	}

	// An unknown workspace is ErrNotExist too, for every kind of call.
	ghost := c.Workspace("ws_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	if _, err := ghost.Stat(ctx, "x"); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("Stat in an unknown workspace: %v", err)
	}
	if _, err := ghost.CallTool(ctx, "ls", nil, nil); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("CallTool in an unknown workspace: %v", err)
	}
	if _, err := ghost.Exec(ctx, opsapi.ExecRequest{Command: "true"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("Exec in an unknown workspace: %v", err)
	}
	if root := ghost.Root(); root != "" {
		t.Errorf("Root of an unknown workspace = %q, want empty", root)
	}

	// A wrong token is refused, recognisably.
	for _, tok := range []string{"", "not-the-token"} {
		wrong := client.New(url, tok)
		if _, err := wrong.ListWorkspaces(ctx); !client.IsUnauthorized(err) || !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("token %q: %v, want unauthorized", tok, err)
		}
	}

	// Nothing listening: ErrUnavailable.
	down := client.New("http://127.0.0.1:1", testToken)
	if _, err := down.ListWorkspaces(ctx); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Errorf("no broker: %v, want ErrUnavailable", err)
	}
}

// failingReader yields some bytes, then fails.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestWriteFileFailingReaderLeavesOldFile(t *testing.T) {
	ctx := context.Background()
	c, _ := startBroker(t, broker.Config{})
	ws := newWorkspace(t, c)
	if err := ws.WriteFile(ctx, "f.txt", strings.NewReader("old content\n")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk offline")
	// More than one chunk goes out before the failure, so the broker has
	// really started writing when the upload breaks.
	err := ws.WriteFile(ctx, "f.txt", &failingReader{data: bytes.Repeat([]byte("new"), 200<<10), err: boom})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFile with a failing reader: %v, want the reader's error", err)
	}
	if got := readAll(t, ws, "f.txt"); got != "old content\n" {
		t.Fatalf("after a failed upload the file holds %d bytes, want the old content", len(got))
	}
	// The connection pool is still healthy afterwards.
	if err := ws.WriteFile(ctx, "f.txt", strings.NewReader("new content\n")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ws, "f.txt"); got != "new content\n" {
		t.Fatalf("got %q", got)
	}
}

func TestWriteFileOverTheLimitIsTooLarge(t *testing.T) {
	ctx := context.Background()
	c, _ := startBroker(t, broker.Config{MaxUploadBytes: 1 << 20})
	ws := newWorkspace(t, c)
	if err := ws.WriteFile(ctx, "f.bin", strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	err := ws.WriteFile(ctx, "f.bin", bytes.NewReader(make([]byte, 3<<20)))
	if !errors.Is(err, opsapi.ErrTooLarge) {
		t.Fatalf("upload over the limit: %v, want ErrTooLarge", err)
	}
	if got := readAll(t, ws, "f.bin"); got != "old" {
		t.Fatalf("after a refused upload the file holds %d bytes, want the old content", len(got))
	}
}

// chunkWriter records each Write separately, to see output arrive in
// pieces while the command runs.
type chunkWriter struct {
	mu     sync.Mutex
	chunks []string
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.chunks = append(w.chunks, string(p))
	return len(p), nil
}

func (w *chunkWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.chunks, "")
}

func TestExecStreamsOutputAndTimeout(t *testing.T) {
	ctx := context.Background()
	c, _ := startBroker(t, broker.Config{})
	ws := newWorkspace(t, c)

	w := &chunkWriter{}
	res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: `printf 'a\0b\377'; echo "$FOO" >&2; pwd; exit 5`, Env: []string{"FOO=bar"}, Output: w})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 5 {
		t.Fatalf("exit code %d, want 5", res.ExitCode)
	}
	if got, want := w.String(), "a\x00b\xffbar\n"+ws.Root()+"\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}

	// Output arrives while the command still runs.
	w = &chunkWriter{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = ws.Exec(ctx, opsapi.ExecRequest{Command: "echo first; sleep 2; echo second", Output: w})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(w.String(), "first") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the first line only arrived after the command ended")
	default:
	}
	<-done

	// The timeout travels as seconds and is enforced by the broker.
	res, err = ws.Exec(ctx, opsapi.ExecRequest{Command: "sleep 30", Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout: %+v, %v", res, err)
	}
	if _, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "true", Cwd: "no/such/dir"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("missing cwd: %v, want ErrNotExist", err)
	}
	if _, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "true", Timeout: -time.Second}); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("negative timeout: %v, want ErrInvalid", err)
	}
}

func TestCallToolAndBatch(t *testing.T) {
	ctx := context.Background()
	c, _ := startBroker(t, broker.Config{})
	ws := newWorkspace(t, c)

	res, err := ws.CallTool(ctx, "write", json.RawMessage(`{"path":"a/b.txt","content":"one\ntwo\n"}`), nil)
	if err != nil || res.IsError {
		t.Fatalf("write: %+v, %v", res, err)
	}
	res, err = ws.CallTool(ctx, "read", json.RawMessage(`{"path":"a/b.txt"}`), nil)
	if err != nil || res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "one\ntwo") {
		t.Fatalf("read: %+v, %v", res, err)
	}
	// A tool failure is a result, not an error.
	res, err = ws.CallTool(ctx, "read", json.RawMessage(`{"path":"nope.txt"}`), nil)
	if err != nil || !res.IsError {
		t.Fatalf("read of a missing file: %+v, %v", res, err)
	}
	if _, err := ws.CallTool(ctx, "nosuchtool", nil, nil); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("unknown tool: %v, want ErrNotExist", err)
	}
	if _, err := ws.CallTool(ctx, "read", json.RawMessage(`{"path":`), nil); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("non-JSON arguments: %v, want ErrInvalid", err)
	}

	// Streaming: updates arrive before the result.
	var updates []tools.Result
	res, err = ws.CallTool(ctx, "bash", json.RawMessage(`{"command":"for i in 1 2 3 4; do echo line$i; sleep 0.4; done"}`),
		func(r tools.Result) { updates = append(updates, r) })
	if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "line4") {
		t.Fatalf("streamed bash: %+v, %v", res, err)
	}
	if len(updates) == 0 {
		t.Fatal("no update arrived while bash ran for 1.6 s")
	}

	results, err := ws.Batch(ctx, []wire.BatchCall{
		{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"echo hi"}`)},
		{ID: "c2", Name: "nosuchtool"},
		{ID: "c3", Name: "ls", Arguments: json.RawMessage(`{"path":"a"}`)},
	}, wire.Sequential)
	if err != nil || len(results) != 3 {
		t.Fatalf("batch: %+v, %v", results, err)
	}
	for i, want := range []string{"c1", "c2", "c3"} {
		if results[i].ID != want {
			t.Fatalf("result %d has id %q, want %q (source order)", i, results[i].ID, want)
		}
	}
	if results[0].Result.IsError || !results[1].Result.IsError || results[2].Result.IsError ||
		!strings.Contains(results[2].Result.Content[0].Text, "b.txt") {
		t.Fatalf("batch results: %+v", results)
	}
}

func TestOpenStreamsAndStopsOnCancel(t *testing.T) {
	c, _ := startBroker(t, broker.Config{})
	ws := newWorkspace(t, c)
	if err := ws.WriteFile(context.Background(), "big.bin", bytes.NewReader(make([]byte, 64<<20))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := ws.Open(ctx, "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = io.Copy(io.Discard, rc)
	if !errors.Is(err, opsapi.ErrCanceled) {
		t.Fatalf("reading after cancel: %v, want ErrCanceled", err)
	}
}

// Cancelling a tool call stops it on the broker, and the broker's own
// result (pi's "Command aborted" after the output so far) still arrives,
// streamed or not.
func TestCallToolCancelGetsTheAbortedResult(t *testing.T) {
	c, _ := startBroker(t, broker.Config{})
	for _, streamed := range []bool{false, true} {
		ws := newWorkspace(t, c)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer cancel()
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := ws.Stat(context.Background(), "started"); err == nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		var onUpdate tools.UpdateFunc
		if streamed {
			onUpdate = func(tools.Result) {}
		}
		start := time.Now()
		res, err := ws.CallTool(ctx, "bash", json.RawMessage(`{"command":"echo before; touch started; sleep 60"}`), onUpdate)
		if err != nil {
			t.Fatalf("streamed=%v: %v", streamed, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("streamed=%v: returned after %v, the command was not stopped", streamed, d)
		}
		if !res.IsError || len(res.Content) != 1 || res.Content[0].Text != "before\n\n\nCommand aborted" {
			t.Fatalf("streamed=%v: result %+v, want pi's aborted text after the output", streamed, res)
		}
	}
}

// TestCallsShareOneConnection: every kind of call, streamed ones included,
// leaves its connection ready for the next, so a caller making calls one
// after another opens one connection (a stream closed before its end
// would cost each exec a new one).
func TestCallsShareOneConnection(t *testing.T) {
	lb, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	srv, err := broker.New(broker.Config{Tokens: []string{testToken}}, map[string]opsapi.Backend{lb.Name(): lb}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	var conns atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c := client.New(ts.URL, testToken)
	ws := newWorkspace(t, c)
	ctx := t.Context()
	before := conns.Load()
	for i := range 3 {
		if err := ws.WriteFile(ctx, "f.txt", strings.NewReader(strings.Repeat("x", 4096))); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, ws, "f.txt"); len(got) != 4096 {
			t.Fatalf("read %d bytes", len(got))
		}
		if res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "echo hi"}); err != nil || res.ExitCode != 0 {
			t.Fatal(res, err)
		}
		if _, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "true", Cwd: "missing"}); !errors.Is(err, opsapi.ErrNotExist) {
			t.Fatalf("exec in a missing directory: %v", err)
		}
		args := json.RawMessage(`{"command":"echo ` + fmt.Sprint(i) + `"}`)
		if res, err := ws.CallTool(ctx, "bash", args, nil); err != nil || res.IsError {
			t.Fatal(res, err)
		}
		if res, err := ws.CallTool(ctx, "bash", args, func(tools.Result) {}); err != nil || res.IsError {
			t.Fatal(res, err)
		}
	}
	if n := conns.Load() - before; n > 1 {
		t.Fatalf("%d connections for calls made one after another, want at most 1", n)
	}
}
