package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
)

// createTimeout bounds a backend's Create; it runs detached from the
// request so that a client that goes away cannot leave a half-made sandbox.
const createTimeout = 5 * time.Minute

// workspacesResource serves /v1/workspaces.
type workspacesResource struct{ s *Server }

// Routes returns the workspace collection, each workspace, and the tool and
// operation resources mounted under it.
func (res workspacesResource) Routes() chi.Router {
	s := res.s
	r := chi.NewRouter()
	r.With(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON).Post("/", res.create)
	r.Get("/", res.list)
	r.Route("/{id}", func(r chi.Router) {
		r.Use(s.withWorkspace)
		r.Get("/", res.get)
		r.Delete("/", res.delete)
		processRoutes(r, res)
		r.Mount("/tools", toolsResource(res).Routes())
		r.Mount("/", opsResource(res).Routes())
	})
	return r
}

func (res workspacesResource) create(w http.ResponseWriter, r *http.Request) {
	s := res.s
	data, err := s.readBody(w, r)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var req wire.CreateRequest
	if err := decodeStrict(data, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if req.Backend == "" {
		req.Backend = s.cfg.DefaultBackend
	}
	b, ok := s.backends[req.Backend]
	if !ok {
		writeProblem(w, r, s.logger, invalid("create", "", "unknown backend %q", req.Backend))
		return
	}
	if string(req.Options) == "null" {
		req.Options = nil
	}
	t := tenantFrom(r.Context())
	opts, err := s.admit(t, req.Backend, req.Options)
	if err != nil {
		auditDenial(r, "tenant", err.Error())
		writeProblem(w, r, s.logger, err)
		return
	}
	req.Options = opts
	release, err := s.reserveWorkspace(t)
	if err != nil {
		auditDenial(r, "quota", err.Error())
		writeProblem(w, r, s.logger, err)
		return
	}
	defer release()
	if s.isStopping() {
		writeProblem(w, r, s.logger, errShuttingDown)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), createTimeout)
	defer cancel()
	id := newID()
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: id, Options: req.Options})
	if err != nil {
		writeProblem(w, r, s.logger, fmt.Errorf("creating a %s workspace: %w", req.Backend, err))
		return
	}
	if err := s.owners.set(id, t.Name); err != nil {
		s.logger.Error("recording the workspace's owner failed; it will belong to the first tenant after a restart",
			"workspace", id, "tenant", t.Name, "err", err)
	}
	wk := s.add(id, req.Backend, t.Name, ws, time.Now())
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Workspace = id })
	s.logger.Info("workspace created", "workspace", id, "backend", req.Backend, "tenant", t.Name, "root", ws.Root(),
		"request_id", middleware.GetReqID(r.Context()))
	w.Header().Set("Location", "/v1/workspaces/"+id)
	writeJSON(w, r, http.StatusCreated, wk.info())
}

func (res workspacesResource) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, wire.WorkspaceList{Workspaces: res.s.list(tenantFrom(r.Context()).Name)})
}

func (res workspacesResource) get(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, workspaceFrom(r.Context()).info())
}

// delete forgets the workspace first (new requests get 404), cancels its
// running commands, then destroys the sandbox and its data.
func (res workspacesResource) delete(w http.ResponseWriter, r *http.Request) {
	s := res.s
	wk := workspaceFrom(r.Context())
	if _, ok := s.remove(wk.id); !ok {
		writeProblem(w, r, s.logger, fmt.Errorf("workspace %q: %w", wk.id, ErrNotFound))
		return
	}
	s.calls.cancelWorkspace(wk.id, errors.New("workspace deleted"))
	if d, ok := wk.ws.(opsapi.Destroyer); ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), createTimeout)
		defer cancel()
		if err := d.Destroy(ctx); err != nil {
			// Keep it listed: the sandbox still exists and can be retried.
			s.readd(wk)
			writeProblem(w, r, s.logger, fmt.Errorf("destroying workspace %s: %w", wk.id, err))
			return
		}
	}
	if err := s.owners.set(wk.id, ""); err != nil {
		s.logger.Warn("forgetting the workspace's owner failed", "workspace", wk.id, "err", err)
	}
	s.logger.Info("workspace deleted", "workspace", wk.id, "backend", wk.backend,
		"request_id", middleware.GetReqID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) readd(wk *workspace) {
	s.mu.Lock()
	s.workspaces[wk.id] = wk
	s.mu.Unlock()
	s.metrics.workspaces.WithLabelValues(wk.backend).Inc()
}

// ctxKey is the unexported type of the broker's context keys.
type ctxKey int

const workspaceKey ctxKey = iota

func workspaceFrom(ctx context.Context) *workspace {
	return ctx.Value(workspaceKey).(*workspace)
}

// withWorkspace resolves {id} (404 when unknown) and counts the bytes that
// flow in and out of the workspace's backend.
func (s *Server) withWorkspace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		wk, foreign, err := s.lookup(tenantFrom(r.Context()), id)
		if err != nil {
			if foreign {
				// Answered exactly as a missing workspace; only the audit
				// trail and the log know.
				auditDenial(r, "tenant", "workspace belongs to another tenant")
				reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Workspace = id })
				s.logger.Warn("request for another tenant's workspace", "workspace", id,
					"tenant", tenantFrom(r.Context()).Name, "request_id", middleware.GetReqID(r.Context()))
			}
			writeProblem(w, r, s.logger, err)
			return
		}
		reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Workspace = id })
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		before := ww.BytesWritten()
		body := &countingReader{rc: r.Body}
		r.Body = body
		defer func() {
			s.metrics.bytesIn.WithLabelValues(wk.backend).Add(float64(body.n))
			s.metrics.bytesOut.WithLabelValues(wk.backend).Add(float64(ww.BytesWritten() - before))
		}()
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), workspaceKey, wk)))
	})
}

type countingReader struct {
	rc io.ReadCloser
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.rc.Close() }

// createOptions are the fields of a create's options the broker reads for
// admission; the backend validates the whole.
type createOptions struct {
	Image   string `json:"image"`
	Network string `json:"network"`
}

// hostNetwork names the network of backends whose commands share the
// host's (local) or the remote host's (ssh) network.
const hostNetwork = "host"

// admit checks a create against the tenant: backend, image, workspace
// quota and the policy's network rule. It returns the options to pass on:
// for docker without a network named, the policy's first allowed mode is
// filled in, so the backend's default cannot widen it.
func (s *Server) admit(t *tenant.Tenant, backend string, options json.RawMessage) (json.RawMessage, error) {
	deny := func(format string, args ...any) error {
		return opsapi.E("create", "", opsapi.ErrDenied, fmt.Errorf(format, args...))
	}
	if !t.AllowsBackend(backend) {
		return nil, deny("tenant %s may not use the %s backend", t.Name, backend)
	}
	var opts createOptions
	var fields map[string]json.RawMessage
	if len(options) > 0 {
		// Shape errors are the backend's to report; only read what parses.
		_ = json.Unmarshal(options, &opts)
		_ = json.Unmarshal(options, &fields)
	}
	if !t.AllowsImage(opts.Image) {
		return nil, deny("tenant %s may not use the image %q", t.Name, opts.Image)
	}
	pol := t.Policy
	network := hostNetwork
	if backend == "docker" {
		network = opts.Network
		if network == "" && pol != nil && len(pol.Network.Allow) > 0 && !strings.ContainsAny(pol.Network.Allow[0], "*?[\\") {
			network = pol.Network.Allow[0]
			if fields == nil {
				fields = map[string]json.RawMessage{}
			}
			fields["network"], _ = json.Marshal(network)
			options, _ = json.Marshal(fields)
		}
		if network == "" {
			network = "default"
		}
	}
	if pol != nil {
		if d := pol.Decide(policy.Call{Network: network, HasNetwork: true}); !d.Allowed {
			return nil, deny("%s", d.Message())
		}
	}
	return options, nil
}

// reserveWorkspace holds one of the tenant's workspace slots while a
// create runs, so that parallel creates cannot together pass the quota.
// The returned func gives the reservation back (the workspace, if made,
// is counted by then).
func (s *Server) reserveWorkspace(t *tenant.Tenant) (func(), error) {
	q := t.Quotas.Workspaces
	if q <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.creating[t.Name]
	for _, w := range s.workspaces {
		if w.tenant == t.Name {
			held++
		}
	}
	if held >= q {
		return nil, opsapi.E("create", "", opsapi.ErrDenied,
			fmt.Errorf("workspace quota exceeded: tenant %s holds %d of %d workspaces", t.Name, held, q))
	}
	s.creating[t.Name]++
	return func() {
		s.mu.Lock()
		s.creating[t.Name]--
		s.mu.Unlock()
	}, nil
}
