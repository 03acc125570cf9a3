package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/mcp"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789"
)

// harness is a broker with tenants alice and bob over the given backends
// (a local one when none), served on loopback.
type harness struct {
	t   testing.TB
	srv *broker.Server
	hs  *httptest.Server
}

func newHarness(t testing.TB, alicePolicy *policy.Policy, backends map[string]opsapi.Backend, mod func(*broker.Config)) *harness {
	t.Helper()
	logger := testutil.Logger(t)
	if backends == nil {
		b, err := local.New(local.Config{StateDir: t.TempDir()}, logger.With("backend", "local"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		backends = map[string]opsapi.Backend{"local": b}
	}
	at, err := tenant.New(tenant.Config{Name: "alice", TokenHashes: []string{tenant.HashToken(aliceToken)}}, alicePolicy)
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := tenant.New(tenant.Config{Name: "bob", TokenHashes: []string{tenant.HashToken(bobToken)}}, nil)
	reg, err := tenant.NewRegistry(at, bt)
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.Config{Tenants: reg}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := broker.New(cfg, backends, logger)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	return &harness{t: t, srv: srv, hs: hs}
}

// do sends an authorized JSON request and decodes the answer into out.
func (h *harness) do(token, method, path string, body, out any) int {
	h.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.hs.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			h.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func (h *harness) create(token string) wire.WorkspaceInfo {
	h.t.Helper()
	return h.createOn(token, "", nil)
}

func (h *harness) createOn(token, backend string, options any) wire.WorkspaceInfo {
	h.t.Helper()
	var ws wire.WorkspaceInfo
	body := map[string]any{}
	if backend != "" {
		body["backend"] = backend
	}
	if options != nil {
		body["options"] = options
	}
	if code := h.do(token, "POST", "/v1/workspaces", body, &ws); code != http.StatusCreated {
		h.t.Fatalf("create: %d", code)
	}
	return ws
}

// httpTool calls a tool through the HTTP tool route.
func (h *harness) httpTool(token, id, name string, args any) wire.ToolResult {
	h.t.Helper()
	var res wire.ToolResult
	if code := h.do(token, "POST", "/v1/workspaces/"+id+"/tools/"+name, args, &res); code != http.StatusOK {
		h.t.Fatalf("%s over HTTP: %d", name, code)
	}
	return res
}

// bearer adds the Authorization header, as an MCP client configured with
// a static header does.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connect opens an MCP session with the SDK's own client.
func (h *harness) connect(token, path string, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "wsbroker-test", Version: "1"}, opts)
	return c.Connect(h.t.Context(), &sdk.StreamableClientTransport{
		Endpoint:   h.hs.URL + path,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

func (h *harness) mustConnect(token, path string, opts *sdk.ClientOptions) *sdk.ClientSession {
	h.t.Helper()
	cs, err := h.connect(token, path, opts)
	if err != nil {
		h.t.Fatalf("connecting to %s: %v", path, err)
	}
	h.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callMCP(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s over MCP: %v", name, err)
	}
	return res
}

// wireOf is an MCP result in the HTTP route's shape, for comparing.
func wireOf(t *testing.T, res *sdk.CallToolResult) wire.ToolResult {
	t.Helper()
	out := wire.ToolResult{Content: []wire.Content{}, IsError: res.IsError, Details: res.Meta[mcp.DetailsMetaKey]}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			out.Content = append(out.Content, wire.Content{Type: "text", Text: c.Text})
		case *sdk.ImageContent:
			out.Content = append(out.Content, wire.Content{Type: "image", Data: base64.StdEncoding.EncodeToString(c.Data), MimeType: c.MIMEType})
		default:
			t.Fatalf("unexpected content %T", c)
		}
	}
	return out
}

// normalized is r as JSON with root replaced, so that two workspaces'
// results compare equal.
func normalized(t *testing.T, r wire.ToolResult, root string) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	b, _ = json.Marshal(v)
	return strings.ReplaceAll(string(b), root, "ROOT")
}

func text(res *sdk.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// eventually polls cond for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
