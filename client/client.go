package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// DefaultURL is where a broker listens unless told otherwise.
const DefaultURL = "http://127.0.0.1:8722"

// Client talks to one broker with one token. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc. hc should
// have no overall Timeout: exec and file streams last as long as their
// context allows.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// New returns a client for the broker at baseURL (e.g.
// "http://127.0.0.1:8722") that authenticates with token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: defaultTransport()}
	}
	return c
}

// defaultTransport keeps enough idle connections for a host that runs many
// tool calls in parallel against one broker (the default keeps two), and
// buffers 64 KiB each way instead of 4 KiB, so that a request carrying a
// small file goes out in one write and a 4 KiB read comes in with one.
func defaultTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.WriteBufferSize = 64 << 10
	t.ReadBufferSize = 64 << 10
	return t
}

// CreateWorkspace asks for a new workspace on backend ("" means the
// broker's default, local) with the backend's options (nil for defaults).
func (c *Client) CreateWorkspace(ctx context.Context, backend string, options json.RawMessage) (wire.WorkspaceInfo, error) {
	return c.Create(ctx, wire.CreateRequest{Backend: backend, Options: options})
}

// Create asks for a new workspace as req says: backend and options, or
// a profile configured on the broker (req.Profile) instead of them; and
// environment.
func (c *Client) Create(ctx context.Context, req wire.CreateRequest) (wire.WorkspaceInfo, error) {
	var info wire.WorkspaceInfo
	err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces", nil, req, &info)
	return info, err
}

// ListWorkspaces returns every workspace the broker holds.
func (c *Client) ListWorkspaces(ctx context.Context) ([]wire.WorkspaceInfo, error) {
	var out wire.WorkspaceList
	err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces", nil, nil, &out)
	return out.Workspaces, err
}

// GetWorkspace describes one workspace; an unknown id is opsapi.ErrNotExist.
func (c *Client) GetWorkspace(ctx context.Context, id string) (wire.WorkspaceInfo, error) {
	var info wire.WorkspaceInfo
	err := c.doJSON(ctx, http.MethodGet, wsPath(id, ""), nil, nil, &info)
	return info, err
}

// DeleteWorkspace destroys a workspace, its data and its processes; an
// unknown id is opsapi.ErrNotExist.
func (c *Client) DeleteWorkspace(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, wsPath(id, ""), nil, nil, nil)
}

// Tools returns the declarations of the broker's tools (GET /v1/tools).
func (c *Client) Tools(ctx context.Context) ([]wire.ToolDefinition, error) {
	var out wire.ToolList
	err := c.doJSON(ctx, http.MethodGet, "/v1/tools", nil, nil, &out)
	return out.Tools, err
}

// wsPath is the route of workspace id, plus sub (e.g. "/files").
func wsPath(id, sub string) string {
	return "/v1/workspaces/" + url.PathEscape(id) + sub
}

// newRequest builds an authenticated request; body may be nil.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, opsapi.E("client", "", opsapi.ErrInvalid, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// send runs req and turns a transport failure or an error status into an
// opsapi error. On success the caller owns resp.Body.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, transportError(req.Context(), err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, ToNative(resp)
	}
	return resp, nil
}

// transportError classifies a failure to talk to the broker at all: the
// context's end is ErrCanceled or ErrTimeout, anything else ErrUnavailable.
func transportError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return opsapi.E("client", "", nil, cerr)
	}
	return opsapi.E("client", "", opsapi.ErrUnavailable, err)
}

// doJSON sends in (when not nil) as a JSON body and decodes a JSON
// response into out (when not nil).
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return opsapi.E("client", "", opsapi.ErrInvalid, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if out != nil {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body) // lets the connection be reused
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return decodeError(ctx, method, path, err)
	}
	return nil
}

// decodeError reports a response body that ended early or was not the
// expected JSON.
func decodeError(ctx context.Context, method, path string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return opsapi.E("client", "", nil, cerr)
	}
	return opsapi.E("client", "", opsapi.ErrUnavailable, fmt.Errorf("decoding response of %s %s: %w", method, path, err))
}
