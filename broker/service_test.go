//nolint:bodyclose // every response is closed by the t.Cleanup that env.send registers
package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(e.hs.URL + p) // no token: probes are public
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("GET %s: no X-Request-Id", p)
		}
	}
	// A client's request id is kept, so logs on both sides line up.
	req := e.request("GET", "/v1/workspaces", nil)
	req.Header.Set("X-Request-Id", "client-chosen-id")
	if got := e.send(req).Header.Get("X-Request-Id"); got != "client-chosen-id" {
		t.Errorf("X-Request-Id %q, want the client's", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(e.hs.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkProblem(t, resp, data, http.StatusServiceUnavailable, "unavailable")
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	e.must(http.StatusNoContent, "PUT", wsPath(ws, "/files", "m.txt"), "hello metrics", nil)
	e.must(http.StatusOK, "GET", wsPath(ws, "/files", "m.txt"), nil, nil)
	e.problem(http.StatusNotFound, "not_found", "GET", "/v1/workspaces/ws_nope", nil)

	resp, err := http.Get(e.hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`wsbroker_http_requests_total{code="201",method="POST",route="/v1/workspaces"} 1`,
		`wsbroker_http_requests_total{code="204",method="PUT",route="/v1/workspaces/{id}/files"} 1`,
		`wsbroker_http_requests_total{code="404",method="GET",route="/v1/workspaces/{id}"} 1`,
		`wsbroker_http_request_duration_seconds_bucket{method="GET",route="/v1/workspaces/{id}/files",le="+Inf"} 1`,
		`wsbroker_workspaces{backend="local"} 1`,
		`wsbroker_running_commands 0`,
		`wsbroker_bytes_in_total{backend="local"} 13`,
		`wsbroker_bytes_out_total{backend="local"} 13`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", grepLines(text, "wsbroker_"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOpenAPIMatchesRouter holds the embedded document and the router
// equal: every route the router serves is documented, and every documented
// route is served.
func TestOpenAPIMatchesRouter(t *testing.T) {
	e := newEnv(t, nil)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	served := e.must(http.StatusOK, "GET", "/v1/openapi.json", nil, &doc)
	if !bytes.Equal(served, broker.OpenAPI()) {
		t.Error("/v1/openapi.json is not the embedded document")
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, item := range doc.Paths {
		for m := range item {
			if m == "parameters" || m == "summary" || m == "description" {
				continue
			}
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	routed := map[string]bool{}
	routes, ok := e.srv.Handler().(chi.Routes)
	if !ok {
		t.Fatalf("Handler is %T, not a chi router", e.srv.Handler())
	}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = broker.NormalizeRoute(route)
		routed[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range routed {
		if !documented[r] {
			t.Errorf("route %s is served but not in openapi.json", r)
		}
	}
	for d := range documented {
		if !routed[d] {
			t.Errorf("route %s is in openapi.json but not served", d)
		}
	}
	if t.Failed() {
		t.Logf("routed: %v", sortedSet(routed))
	}
}

func sortedSet(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	const wrong = "wrong-secret-must-not-be-logged"
	cases := []struct {
		name   string
		header string
		query  string
		status int
	}{
		{"missing", "", "", 401},
		{"empty bearer", "Bearer ", "", 401},
		{"wrong token", "Bearer " + wrong, "", 401},
		{"token prefix", "Bearer " + testToken[:len(testToken)-1], "", 401},
		{"token with suffix", "Bearer " + testToken + "x", "", 401},
		{"basic scheme", "Basic " + testToken, "", 401},
		{"no scheme", testToken, "", 401},
		{"query token only", "", "?access_token=" + testToken, 401},
		{"query token beside header", "Bearer " + testToken, "?access_token=" + testToken, 401},
		{"query token= beside header", "Bearer " + testToken, "?token=" + testToken, 401},
		{"valid", "Bearer " + testToken, "", 200},
		{"valid, scheme case-insensitive", "bearer " + testToken, "", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.hs.URL+"/v1/workspaces"+c.query, nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if c.status == 200 {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, data)
				}
				return
			}
			checkProblem(t, resp, data, 401, "unauthorized")
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	// Every /v1 route is behind the token, unknown ones included (no
	// route discovery without it).
	for _, p := range []string{"/v1/tools", "/v1/openapi.json", "/v1/workspaces/ws_x/files?path=a", "/v1/nope"} {
		resp, err := http.Get(e.hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		checkProblem(t, resp, data, 401, "unauthorized")
	}
	logs := e.logs.String()
	if strings.Contains(logs, testToken) || strings.Contains(logs, wrong) {
		t.Error("a token appears in the logs")
	}
	if !strings.Contains(logs, `"request_id"`) {
		t.Error("request logs carry no request_id")
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	e.problem(http.StatusNotFound, "not_found", "GET", "/v1/nope", nil)
	e.problem(http.StatusNotFound, "not_found", "GET", "/nope", nil)
	e.problem(http.StatusNotFound, "not_found", "GET", "/v1/workspaces/"+ws.ID+"/nope", nil)

	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/tools", "GET"},
		{"PUT", "/v1/workspaces/" + ws.ID + "/exec", "POST"},
		{"DELETE", "/v1/workspaces/" + ws.ID + "/files?path=a", "GET, PUT"},
		{"GET", "/v1/workspaces/" + ws.ID + "/tools/read", "POST"},
		{"POST", "/v1/workspaces/" + ws.ID, "GET, DELETE"},
	} {
		resp, data := e.do(c.method, c.path, nil)
		p := checkProblem(t, resp, data, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := strings.Join(resp.Header.Values("Allow"), ", "); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q (%s)", c.method, c.path, got, c.allow, p.Detail)
		}
	}
	resp, data := e.do("PUT", "/v1/tools", nil)
	golden(t, "problem_method_not_allowed", data)
	_ = resp
}

func TestUnsupportedMediaType(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.workspace()
	for _, p := range []string{"/v1/workspaces", "/v1/workspaces/" + ws.ID + "/exec", "/v1/workspaces/" + ws.ID + "/tools/bash", "/v1/workspaces/" + ws.ID + "/glob"} {
		req := e.request("POST", p, `{"command":"touch ran"}`)
		req.Header.Set("Content-Type", "text/plain")
		resp := e.send(req)
		data, _ := io.ReadAll(resp.Body)
		checkProblem(t, resp, data, http.StatusUnsupportedMediaType, "unsupported_media_type")
	}
	// application/json with parameters and +json types are JSON.
	req := e.request("POST", "/v1/workspaces/"+ws.ID+"/glob", `{"pattern":"*.none"}`)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if resp := e.send(req); resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("application/json; charset=utf-8: %d %s", resp.StatusCode, b)
	}
	if _, err := statHost(ws, "ran"); err == nil {
		t.Error("a command ran despite the 415")
	}
}

func TestBodyTooLarge(t *testing.T) {
	const limit = 4 << 10
	e := newEnv(t, func(c *broker.Config) { c.MaxJSONBody = limit; c.MaxToolBody = limit })
	ws := e.workspace()
	big := `{"command":"touch ran; echo ` + strings.Repeat("x", limit) + `"}`
	for _, p := range []string{"/v1/workspaces/" + ws.ID + "/exec", "/v1/workspaces/" + ws.ID + "/tools/bash", "/v1/workspaces"} {
		// Declared length: refused before the body is read.
		resp, data := e.do("POST", p, big)
		checkProblem(t, resp, data, http.StatusRequestEntityTooLarge, "too_large")
		// Chunked, no declared length: cut off at the limit while reading.
		req := e.request("POST", p, io.MultiReader(strings.NewReader(big)))
		if req.ContentLength != 0 {
			t.Fatalf("request has a length: %d", req.ContentLength)
		}
		resp = e.send(req)
		data, _ = io.ReadAll(resp.Body)
		checkProblem(t, resp, data, http.StatusRequestEntityTooLarge, "too_large")
	}
	if _, err := statHost(ws, "ran"); err == nil {
		t.Error("a command ran despite the 413")
	}
	var list wire.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 {
		t.Errorf("%d workspaces after refused creates, want 1", len(list.Workspaces))
	}
}

func TestHTTPServerTimeouts(t *testing.T) {
	def := newEnv(t, nil)
	hs := def.srv.HTTPServer()
	if hs.ReadHeaderTimeout != 10*time.Second {
		t.Errorf("default ReadHeaderTimeout %v, want 10s", hs.ReadHeaderTimeout)
	}
	if hs.MaxHeaderBytes <= 0 || hs.IdleTimeout <= 0 || hs.Addr != "127.0.0.1:8722" {
		t.Errorf("HTTPServer %+v", hs)
	}

	// A slowloris client is cut off after ReadHeaderTimeout.
	e := newEnv(t, func(c *broker.Config) { c.ReadHeaderTimeout = 300 * time.Millisecond })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ctx, ln) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Error("the connection with unfinished headers was still open after 5s")
	}
	// A slow body is cut off after BodyReadTimeout.
	slow := newEnv(t, func(c *broker.Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	ws := slow.workspace()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = io.WriteString(pw, `{"command":"touch ran"`) }() // and never the rest
	req := slow.request("POST", "/v1/workspaces/"+ws.ID+"/exec", pr)
	resp := slow.send(req)
	data, _ := io.ReadAll(resp.Body)
	checkProblem(t, resp, data, http.StatusBadRequest, "bad_request")
	if _, err := statHost(ws, "ran"); err == nil {
		t.Error("a command ran from a body that never finished")
	}

	// Other clients are still served.
	resp, err = http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestToHTTP(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{opsapi.E("read", "a", opsapi.ErrNotExist, nil), 404, "not_exist"},
		{opsapi.ErrExist, 409, "exists"},
		{opsapi.ErrPermission, 403, "permission"},
		{opsapi.ErrIsDir, 409, "is_dir"},
		{opsapi.ErrNotDir, 409, "not_dir"},
		{opsapi.ErrInvalid, 400, "invalid"},
		{opsapi.ErrTooLarge, 413, "too_large"},
		{opsapi.ErrTimeout, 504, "timeout"},
		{opsapi.ErrCanceled, 499, "canceled"},
		{opsapi.ErrDenied, 403, "denied"},
		{opsapi.ErrUnavailable, 503, "unavailable"},
		{errors.New("boom"), 500, "internal"},
		{context.Canceled, 499, "canceled"},
		{&http.MaxBytesError{Limit: 1}, 413, "too_large"},
		{broker.ErrUnauthorized, 401, "unauthorized"},
		{broker.ErrNotFound, 404, "not_found"},
		{broker.ErrMethodNotAllowed, 405, "method_not_allowed"},
		{broker.ErrUnsupportedMediaType, 415, "unsupported_media_type"},
		{broker.ErrBadRequest, 400, "bad_request"},
	}
	for _, c := range cases {
		status, code := broker.ToHTTP(c.err)
		if status != c.status || code != c.code {
			t.Errorf("ToHTTP(%v) = %d %q, want %d %q", c.err, status, code, c.status, c.code)
		}
		// Every opsapi code travels back to its kind (the client's side).
		if k, got := opsapi.KindForCode(code), opsapi.KindOf(c.err); k != nil && got != nil && got != k {
			t.Errorf("code %q maps back to %v, not a kind of %v", code, k, c.err)
		}
	}
}

// pooled is a backend that reports warm pools.
type pooled struct{ opsapi.Backend }

func (pooled) Pools() []opsapi.PoolStatus {
	return []opsapi.PoolStatus{{Name: "default", Size: 4, Ready: 3}}
}

// TestPoolMetrics: a backend's warm pools are on /metrics as they are at
// the scrape.
func TestPoolMetrics(t *testing.T) {
	b, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv, err := broker.New(broker.Config{Tokens: []string{testToken}}, map[string]opsapi.Backend{"local": b, "docker": pooled{b}}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Host = "localhost"
	srv.Handler().ServeHTTP(rec, req)
	for _, want := range []string{
		`wsbroker_pool_ready{backend="docker",pool="default"} 3`,
		`wsbroker_pool_size{backend="docker",pool="default"} 4`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(rec.Body.String(), "wsbroker_pool"))
		}
	}
}
