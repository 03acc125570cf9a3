package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// ErrBadQuery is a /v1/mcp query that names no usable workspace spec.
var ErrBadQuery = errors.New("bad query")

type specKey struct{}

// ServeSessions serves the per-session workspace endpoint for tenant t.
// A request opening a session must carry a usable query (ErrBadQuery is
// answered 400 here); later requests' queries are not read.
func (s *Server) ServeSessions(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, req workspaces.Request) {
	if r.Header.Get("Mcp-Session-Id") == "" {
		spec, err := s.specOf(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), specKey{}, spec))
	}
	s.serve(s.perClient, w, r, t, "sessions", req)
}

// specOf reads the session's workspace spec: ?profile=NAME, or
// ?backend=NAME with the backend's options as the other parameters (a
// value that is a JSON number or boolean is passed as one).
func (s *Server) specOf(q url.Values) (Profile, error) {
	if name := q.Get("profile"); name != "" {
		p, err := s.svc.Profile(name)
		if err != nil {
			return Profile{}, fmt.Errorf("%w: %w", ErrBadQuery, err)
		}
		return p, nil
	}
	opts := map[string]any{}
	for k, vs := range q {
		if k == "backend" || len(vs) == 0 {
			continue
		}
		var v any = vs[0]
		var typed any
		if json.Unmarshal([]byte(vs[0]), &typed) == nil {
			switch typed.(type) {
			case float64, bool:
				v = typed
			}
		}
		opts[k] = v
	}
	p := Profile{Backend: q.Get("backend")}
	if len(opts) > 0 {
		b, err := json.Marshal(opts)
		if err != nil {
			return Profile{}, fmt.Errorf("%w: %w", ErrBadQuery, err)
		}
		p.Options = b
	}
	return p, nil
}

// clientWorkspaces is a /v1/mcp session's workspaces: the one its tools
// run in (made on the first call from the session's spec), and those it
// created, deleted at the session's end unless configured to keep them.
type clientWorkspaces struct {
	s      *Server
	spec   Profile
	tenant string

	mu      sync.Mutex // held across a first call's create
	current string
	created map[string]bool
}

// sessionServer is the SDK server of a new /v1/mcp session.
func (s *Server) sessionServer(r *http.Request) *sdk.Server {
	t := tenantOf(&sdk.RequestExtra{TokenInfo: tokenInfo(r)})
	spec, ok := r.Context().Value(specKey{}).(Profile)
	if t == nil || !ok {
		return nil
	}
	sess := newSession(r)
	cw := &clientWorkspaces{s: s, spec: spec, tenant: t.Name, created: map[string]bool{}}
	if !s.cfg.KeepWorkspaces {
		sess.onEnd = append(sess.onEnd, cw.deleteCreated)
	}
	srv := s.newSDKServer(sess, "pi's read, write, edit, bash, grep, find and ls run in this session's workspace, "+
		"created on the first call; workspace_list, workspace_create, workspace_select and workspace_delete manage more.")
	s.addWorkspaceTools(srv, sess, t, cw.resolve)
	cw.addManagementTools(srv)
	return srv
}

// resolve returns the session's current workspace, creating it on the
// first call.
func (cw *clientWorkspaces) resolve(ctx context.Context, t *tenant.Tenant) (*workspaces.Workspace, error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.current == "" {
		info, err := cw.s.svc.Create(ctx, t, cw.spec.Backend, cw.spec.Options, nil)
		if err != nil {
			return nil, fmt.Errorf("creating the session's workspace: %w", err)
		}
		cw.current = info.ID
		cw.created[info.ID] = true
	}
	return cw.s.svc.Lookup(ctx, t, cw.current)
}

// deleteCreated deletes the workspaces the session created that still
// exist, when the session ends.
func (cw *clientWorkspaces) deleteCreated() {
	cw.mu.Lock()
	ids := make([]string, 0, len(cw.created))
	for id := range cw.created {
		ids = append(ids, id)
	}
	cw.mu.Unlock()
	sort.Strings(ids)
	t := &tenant.Tenant{Name: cw.tenant}
	ctx, cancel := context.WithTimeout(workspaces.WithRequest(context.Background(), workspaces.Request{ID: "mcp-session-end"}), 5*time.Minute)
	defer cancel()
	for _, id := range ids {
		wk, err := cw.s.svc.Lookup(ctx, t, id)
		if err != nil {
			continue // deleted already
		}
		if err := cw.s.svc.Delete(ctx, wk); err != nil {
			cw.s.logger.Error("deleting an ended MCP session's workspace failed", "workspace", id, "tenant", cw.tenant, "err", err)
			continue
		}
		cw.s.logger.Info("deleted an ended MCP session's workspace", "workspace", id, "tenant", cw.tenant)
	}
}
