//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const testToken = "test-token-0123456789"

// env is one broker over a real local backend, served by httptest.
type env struct {
	t       testing.TB
	srv     *broker.Server
	hs      *httptest.Server
	backend *local.Backend
	state   string
	logs    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// teeHandler sends records to the test log and to a buffer the test can
// search (for tokens that must never be logged).
func testLogger(t testing.TB, buf *syncBuffer) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler) // timing, not debugging
	}
	return slog.New(multiHandler{
		testutil.Logger(t).Handler(),
		slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}),
	})
}

type multiHandler []slog.Handler

func (m multiHandler) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (m multiHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range m {
		_ = h.Handle(ctx, r.Clone())
	}
	return nil
}
func (m multiHandler) WithAttrs(a []slog.Attr) slog.Handler {
	out := make(multiHandler, len(m))
	for i, h := range m {
		out[i] = h.WithAttrs(a)
	}
	return out
}
func (m multiHandler) WithGroup(g string) slog.Handler {
	out := make(multiHandler, len(m))
	for i, h := range m {
		out[i] = h.WithGroup(g)
	}
	return out
}

func newEnv(t testing.TB, mod func(*broker.Config)) *env {
	t.Helper()
	state := t.TempDir()
	return newEnvAt(t, state, mod)
}

func newEnvAt(t testing.TB, state string, mod func(*broker.Config)) *env {
	t.Helper()
	logs := &syncBuffer{}
	logger := testLogger(t, logs)
	b, err := local.New(local.Config{StateDir: state}, logger.With("backend", "local"))
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cfg := broker.Config{Tokens: []string{testToken}}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := broker.New(cfg, map[string]opsapi.Backend{"local": b}, logger)
	if err != nil {
		t.Fatalf("broker.New: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		hs.Close()
	})
	return &env{t: t, srv: srv, hs: hs, backend: b, state: state, logs: logs}
}

// request builds an authorized request; body may be nil, a string, []byte
// or an io.Reader.
func (e *env) request(method, path string, body any) *http.Request {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.hs.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func (e *env) send(req *http.Request) *http.Response {
	e.t.Helper()
	resp, err := e.hs.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// do sends an authorized request and returns the response with its body
// read.
func (e *env) do(method, path string, body any) (*http.Response, []byte) {
	e.t.Helper()
	resp := e.send(e.request(method, path, body))
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("reading %s %s: %v", method, path, err)
	}
	return resp, data
}

// must asserts the status and decodes the JSON body into v (when not nil).
func (e *env) must(status int, method, path string, body, v any) []byte {
	e.t.Helper()
	resp, data := e.do(method, path, body)
	if resp.StatusCode != status {
		e.t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, resp.StatusCode, status, data)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			e.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
	return data
}

// problem asserts a problem response with status and code and returns it.
func (e *env) problem(status int, code, method, path string, body any) wire.Problem {
	e.t.Helper()
	resp, data := e.do(method, path, body)
	return checkProblem(e.t, resp, data, status, code)
}

func checkProblem(t testing.TB, resp *http.Response, data []byte, status int, code string) wire.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, status, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body: %s", ct, data)
	}
	var p wire.Problem
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("decoding problem %s: %v", data, err)
	}
	if p.Code != code || p.Status != status {
		t.Fatalf("problem %+v, want status %d code %q", p, status, code)
	}
	if p.Type != "https://wsbroker.dev/problems/"+code || p.Title == "" {
		t.Fatalf("problem type/title %+v", p)
	}
	return p
}

// workspace creates a workspace and returns it; it is deleted at cleanup.
func (e *env) workspace() wire.WorkspaceInfo {
	e.t.Helper()
	var ws wire.WorkspaceInfo
	e.must(http.StatusCreated, "POST", "/v1/workspaces", map[string]any{}, &ws)
	return ws
}

// wsPath is the URL path of a workspace route with a path query.
func wsPath(ws wire.WorkspaceInfo, route, p string) string {
	u := "/v1/workspaces/" + ws.ID + route
	if p != "" {
		u += "?path=" + queryEscape(p)
	}
	return u
}

func queryEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "?", "%3F", "\x00", "%00")
	return r.Replace(s)
}

// hostPath is where a workspace path lives on the host (local backend).
func hostPath(ws wire.WorkspaceInfo, rel string) string {
	return filepath.Join(ws.Root, filepath.FromSlash(rel))
}

func writeHost(t testing.TB, ws wire.WorkspaceInfo, rel, content string) {
	t.Helper()
	p := hostPath(ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readHost(t testing.TB, ws wire.WorkspaceInfo, rel string) string {
	t.Helper()
	b, err := os.ReadFile(hostPath(ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// golden compares got (JSON, re-indented) with testdata/golden/name.json,
// or rewrites the file with -update.
func golden(t testing.TB, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(got), "", "  "); err != nil {
		t.Fatalf("golden %s: not JSON: %v: %s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run with -update to create it)", name, err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("golden %s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", name, buf.Bytes(), want)
	}
}

func statHost(ws wire.WorkspaceInfo, rel string) (os.FileInfo, error) {
	return os.Stat(hostPath(ws, rel))
}
