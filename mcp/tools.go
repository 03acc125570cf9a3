package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

// DetailsMetaKey is the _meta key of a result's structured details (the
// HTTP route's "details"): _meta rather than structuredContent, which
// clients would check against an output schema the tools do not have.
const DetailsMetaKey = "wsbroker/details"

// errNoTenant is a call that reached a handler without the broker's
// authentication: a wiring bug, never a client's doing.
var errNoTenant = errors.New("mcp: the request carries no tenant")

// boundServer is the SDK server of a new session on a workspace's
// endpoint: the tools the tenant's policy allows, bound to that workspace.
func (s *Server) boundServer(r *http.Request) *sdk.Server {
	// The SDK asks on every request, also those of a session it already
	// serves, only to learn its protocol versions; building seven tools
	// there was a fifth of a small call's CPU. nil keeps the SDK's own.
	if r.Header.Get("Mcp-Session-Id") != "" {
		return nil
	}
	id, _ := r.Context().Value(workspaceKey{}).(string)
	t := tenantOf(&sdk.RequestExtra{TokenInfo: tokenInfo(r)})
	if id == "" || t == nil {
		return nil
	}
	sess := newSession(r)
	srv := s.newSDKServer(sess, "The tools run in workspace "+id+": pi's read, write, edit, bash, grep, find and ls.")
	resolve := func(ctx context.Context, t *tenant.Tenant) (*workspaces.Workspace, error) {
		return s.svc.Lookup(ctx, t, id)
	}
	s.addWorkspaceTools(srv, sess, t, resolve)
	return srv
}

// resolver finds the workspace a call runs in, for the calling tenant.
type resolver func(ctx context.Context, t *tenant.Tenant) (*workspaces.Workspace, error)

// addWorkspaceTools adds the tools t's policy allows, each running in the
// workspace resolve finds at call time (a deleted one is an error then).
func (s *Server) addWorkspaceTools(srv *sdk.Server, sess *session, t *tenant.Tenant, resolve resolver) {
	for _, def := range s.svc.Tools(t) {
		name := def.Name
		sess.workspaceTools[name] = true
		srv.AddTool(toolOf(def), func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ct := tenantOf(req.Extra)
			if ct == nil {
				return nil, errNoTenant
			}
			ctx = workspaces.WithRequest(ctx, requestOf(req.Extra))
			wk, err := resolve(ctx, ct)
			if err != nil {
				return errorResult(err), nil
			}
			return s.runTool(ctx, req, wk, name)
		})
	}
}

// toolOf is the MCP declaration of a tool: pi's name, description and
// JSON Schema, as GET /v1/tools has them.
func toolOf(def tools.Definition) *sdk.Tool {
	return &sdk.Tool{Name: def.Name, Title: def.Label, Description: def.Description, InputSchema: def.Parameters}
}

// runTool runs one call through the service (policy, quota, redaction,
// audit), numbered in the POST that carried it; one the tenant's limits
// refused (limitCalls) is recorded as refused and does not run. A call
// reports progress when the client asked for it.
func (s *Server) runTool(ctx context.Context, req *sdk.CallToolRequest, wk *workspaces.Workspace, name string) (*sdk.CallToolResult, error) {
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	ci := callInfoOf(ctx)
	if ci.refused != nil {
		return resultOf(s.svc.RefuseTool(ctx, wk, ci.seq, name, args, ci.refused)), nil
	}
	res, err := s.svc.RunTool(ctx, wk, ci.seq, name, args, progressOf(ctx, req))
	if err != nil {
		return nil, err
	}
	return resultOf(res), nil
}

// progressOf sends each partial result's text as a progress notification
// when the client gave a progress token (clients reset their timeouts on
// progress); nil otherwise.
func progressOf(ctx context.Context, req *sdk.CallToolRequest) tools.UpdateFunc {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	n := 0
	return func(u tools.Result) {
		n++
		msg := ""
		for _, c := range u.Content {
			if c.Type == "text" {
				msg += c.Text
			}
		}
		// A failed notification (the client left) is not the call's
		// failure: the session's end cancels the call itself.
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(n), Message: msg,
		})
	}
}

// resultOf turns a tool result into an MCP one: the same blocks, the
// same isError, the details in _meta.
func resultOf(res wire.ToolResult) *sdk.CallToolResult {
	out := &sdk.CallToolResult{Content: make([]sdk.Content, 0, len(res.Content)), IsError: res.IsError}
	for _, c := range res.Content {
		switch c.Type {
		case "image":
			data, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				out.Content = append(out.Content, &sdk.TextContent{Text: "[image not decodable: " + err.Error() + "]"})
				continue
			}
			out.Content = append(out.Content, &sdk.ImageContent{Data: data, MIMEType: c.MimeType})
		default:
			out.Content = append(out.Content, &sdk.TextContent{Text: c.Text})
		}
	}
	if res.Details != nil {
		out.Meta = sdk.Meta{DetailsMetaKey: res.Details}
	}
	return out
}

// errorResult is an isError result carrying err's text.
func errorResult(err error) *sdk.CallToolResult {
	return resultOf(tools.ErrorResult(err.Error()))
}
