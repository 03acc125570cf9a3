package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/tools"
)

// ViaMCP marks a target that calls the tools through the broker's MCP
// endpoint; its rows are paired with the same backend's HTTP rows.
const ViaMCP = "mcp"

// mcpRows are the rows an MCP target measures: whole tool calls, the
// only thing MCP offers.
var mcpRows = []string{toolRead, toolWrite, toolEdit, toolBashTrue, toolGrep, toolFind, toolLs}

// localMCP drives a separate `broker serve` through its per-workspace
// MCP endpoint (/v1/workspaces/{id}/mcp) with the Go SDK's client, so its
// tool rows sit beside local/http's, measured in the same turns.
func localMCP() Target {
	return Target{Name: "local/mcp", Backend: "local", Via: ViaMCP, Rows: mcpRows,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			flags, err := sandboxFlags("off")(env)
			if err != nil {
				return nil, err
			}
			proc, err := startBroker(ctx, env, flags...)
			if err != nil {
				return nil, err
			}
			c := client.New(proc.URL, proc.Token)
			info, err := c.CreateWorkspace(ctx, "local", nil)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("creating a workspace: %w", err), proc.Stop())
			}
			if err := seed(ctx, c.WorkspaceFor(info)); err != nil {
				return nil, errors.Join(err, proc.Stop())
			}
			conns := &mcpConns{endpoint: proc.URL + "/v1/workspaces/" + info.ID + "/mcp", token: proc.Token}
			return &Session{
				PID: proc.PID,
				NewClient: func(i int) (Client, error) {
					call, err := conns.connect(ctx)
					if err != nil {
						return nil, err
					}
					all := toolOps(call, env.Config, i)
					cl := Client{}
					for _, row := range mcpRows {
						cl[row] = all[row]
					}
					return cl, nil
				},
				Close: func(ctx context.Context) error {
					return errors.Join(conns.close(), c.DeleteWorkspace(ctx, info.ID), proc.Stop())
				},
			}, nil
		}}
}

// mcpConns are the MCP sessions of one target, closed with it.
type mcpConns struct {
	endpoint, token string

	mu       sync.Mutex
	sessions []*mcp.ClientSession
}

// connect opens an MCP session with its own connection pool (as a
// separate host would, like the HTTP target's clients) and returns a
// tool caller over it.
func (m *mcpConns) connect(ctx context.Context) (toolFunc, error) {
	hc := &http.Client{Transport: bearer{token: m.token, next: http.DefaultTransport.(*http.Transport).Clone()}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "wsbroker-bench", Version: "0"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m.endpoint, HTTPClient: hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", m.endpoint, err)
	}
	m.mu.Lock()
	m.sessions = append(m.sessions, cs)
	m.mu.Unlock()
	return mcpCall(cs), nil
}

func (m *mcpConns) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, cs := range m.sessions {
		errs = append(errs, cs.Close())
	}
	m.sessions = nil
	return errors.Join(errs...)
}

// mcpCall calls tools over an MCP session and turns the result back into
// the tool result the HTTP route returns (text and images; MCP has no
// details). Progress updates are not asked for.
func mcpCall(cs *mcp.ClientSession) toolFunc {
	return func(ctx context.Context, name string, args json.RawMessage, _ tools.UpdateFunc) (tools.Result, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return tools.Result{}, fmt.Errorf("mcp %s: %w", name, err)
		}
		out := tools.Result{IsError: res.IsError}
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.TextContent:
				out.Content = append(out.Content, tools.Content{Type: "text", Text: c.Text})
			case *mcp.ImageContent:
				out.Content = append(out.Content, tools.Content{Type: "image", MimeType: c.MIMEType})
			}
		}
		return out, nil
	}
}

// bearer adds the broker's token to every request, as MCP clients
// configured with a static Authorization header do.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
