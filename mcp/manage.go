package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// Names of the /v1/mcp tools that manage a session's workspaces.
const (
	ToolWorkspaceList   = "workspace_list"
	ToolWorkspaceCreate = "workspace_create"
	ToolWorkspaceSelect = "workspace_select"
	ToolWorkspaceDelete = "workspace_delete"
)

// WorkspaceEntry is one workspace as the workspace_* tools describe it
// (their text is JSON).
type WorkspaceEntry struct {
	ID        string    `json:"id"`
	Backend   string    `json:"backend"`
	Root      string    `json:"root"`
	CreatedAt time.Time `json:"createdAt"`
	// Current is the workspace the session's tools run in.
	Current bool `json:"current"`
}

type createArgs struct {
	Backend string         `json:"backend,omitempty" jsonschema:"the backend (local, docker, ssh, kubernetes); omitted is the broker's default"`
	Profile string         `json:"profile,omitempty" jsonschema:"a profile configured on the broker, instead of backend and options"`
	Options map[string]any `json:"options,omitempty" jsonschema:"the backend's create options, e.g. {\"image\": \"...\"}"`
}

type idArgs struct {
	ID string `json:"id" jsonschema:"the workspace's id, as workspace_list shows it"`
}

// addManagementTools adds workspace_list, _create, _select and _delete.
func (cw *clientWorkspaces) addManagementTools(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: ToolWorkspaceList,
		Description: "List your workspaces; the one marked current is where read, write, edit, bash, grep, find and ls run."},
		func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			t := tenantOf(req.Extra)
			if t == nil {
				return nil, nil, errNoTenant
			}
			return cw.list(t)
		})
	sdk.AddTool(srv, &sdk.Tool{Name: ToolWorkspaceCreate,
		Description: "Create a workspace and make it current: later tool calls run in it."}, cw.create)
	sdk.AddTool(srv, &sdk.Tool{Name: ToolWorkspaceSelect,
		Description: "Make one of your workspaces current: later tool calls run in it."}, cw.selectOne)
	sdk.AddTool(srv, &sdk.Tool{Name: ToolWorkspaceDelete,
		Description: "Delete one of your workspaces and everything in it."}, cw.deleteOne)
}

func (cw *clientWorkspaces) list(t *tenant.Tenant) (*sdk.CallToolResult, any, error) {
	cw.mu.Lock()
	current := cw.current
	cw.mu.Unlock()
	infos := cw.s.svc.List(t)
	out := make([]WorkspaceEntry, 0, len(infos))
	for _, i := range infos {
		out = append(out, entryOf(i, current))
	}
	return jsonResult(out)
}

func (cw *clientWorkspaces) create(ctx context.Context, req *sdk.CallToolRequest, in createArgs) (*sdk.CallToolResult, any, error) {
	t := tenantOf(req.Extra)
	if t == nil {
		return nil, nil, errNoTenant
	}
	var options json.RawMessage
	if len(in.Options) > 0 {
		b, err := json.Marshal(in.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the options: %w", err)
		}
		options = b
	}
	spec, err := cw.s.svc.CreateSpec(in.Profile, in.Backend, options)
	if err != nil {
		return nil, nil, err
	}
	ctx = workspaces.WithRequest(ctx, requestOf(req.Extra))
	info, err := cw.s.svc.Create(ctx, t, spec.Backend, spec.Options, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a workspace: %w", err)
	}
	cw.mu.Lock()
	cw.current = info.ID
	cw.created[info.ID] = true
	cw.mu.Unlock()
	return jsonResult(entryOf(info, info.ID))
}

func (cw *clientWorkspaces) selectOne(ctx context.Context, req *sdk.CallToolRequest, in idArgs) (*sdk.CallToolResult, any, error) {
	wk, err := cw.lookup(ctx, req, in.ID)
	if err != nil {
		return nil, nil, err
	}
	cw.mu.Lock()
	cw.current = wk.ID()
	cw.mu.Unlock()
	return jsonResult(entryOf(wk.Info(), wk.ID()))
}

func (cw *clientWorkspaces) deleteOne(ctx context.Context, req *sdk.CallToolRequest, in idArgs) (*sdk.CallToolResult, any, error) {
	wk, err := cw.lookup(ctx, req, in.ID)
	if err != nil {
		return nil, nil, err
	}
	if err := cw.s.svc.Delete(workspaces.WithRequest(ctx, requestOf(req.Extra)), wk); err != nil {
		return nil, nil, fmt.Errorf("deleting workspace %s: %w", wk.ID(), err)
	}
	cw.mu.Lock()
	if cw.current == wk.ID() {
		cw.current = "" // the next call makes a new one from the session's spec
	}
	delete(cw.created, wk.ID())
	cw.mu.Unlock()
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Deleted workspace " + wk.ID()}}}, nil, nil
}

// lookup finds the caller's workspace id: another tenant's is the same
// not found as a missing one.
func (cw *clientWorkspaces) lookup(ctx context.Context, req *sdk.CallToolRequest, id string) (*workspaces.Workspace, error) {
	t := tenantOf(req.Extra)
	if t == nil {
		return nil, errNoTenant
	}
	return cw.s.svc.Lookup(workspaces.WithRequest(ctx, requestOf(req.Extra)), t, id)
}

func entryOf(i workspaces.Info, current string) WorkspaceEntry {
	return WorkspaceEntry{ID: i.ID, Backend: i.Backend, Root: i.Root, CreatedAt: i.CreatedAt, Current: i.ID == current}
}

// jsonResult is a result whose one text block is v as indented JSON.
func jsonResult(v any) (*sdk.CallToolResult, any, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the result: %w", err)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil, nil
}
