package broker

import (
	"context"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

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
		r.With(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON).Put("/env", res.setEnv)
		processRoutes(r, res)
		mcpRoutes(r, s, "/mcp", s.serveWorkspaceMCP)
		r.Mount("/tools", toolsResource(res).Routes())
		r.Mount("/", opsResource(res).Routes())
	})
	return r
}

func (res workspacesResource) create(w http.ResponseWriter, r *http.Request) {
	s := res.s
	var req wire.CreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	spec, err := s.svc.CreateSpec(req.Profile, req.Backend, req.Options)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.svc.Create(serviceCtx(r), tenantFrom(r.Context()), spec.Backend, spec.Options, envVars(req.Env))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/workspaces/"+info.ID)
	writeJSON(w, r, http.StatusCreated, workspaceInfo(info))
}

func (res workspacesResource) list(w http.ResponseWriter, r *http.Request) {
	infos := res.s.svc.List(tenantFrom(r.Context()))
	out := wire.WorkspaceList{Workspaces: make([]wire.WorkspaceInfo, len(infos))}
	for i, info := range infos {
		out.Workspaces[i] = workspaceInfo(info)
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (res workspacesResource) get(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, workspaceInfo(workspaceFrom(r.Context()).Info()))
}

// delete forgets the workspace (new requests get 404), cancels its
// running commands, then destroys the sandbox and its data.
func (res workspacesResource) delete(w http.ResponseWriter, r *http.Request) {
	s := res.s
	if err := s.svc.Delete(serviceCtx(r), workspaceFrom(r.Context())); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setEnv replaces the workspace's environment; commands started from
// then on see it. It answers the workspace (names only, never values).
func (res workspacesResource) setEnv(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	var req wire.EnvRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if err := s.svc.SetEnv(serviceCtx(r), wk, envVars(req.Env)); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, workspaceInfo(wk.Info()))
}

// fail answers an error of the workspace service.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeProblem(w, r, s.logger, fromService(err))
}

// ctxKey is the unexported type of the broker's context keys.
type ctxKey int

const workspaceKey ctxKey = iota

func workspaceFrom(ctx context.Context) *workspaces.Workspace {
	return ctx.Value(workspaceKey).(*workspaces.Workspace)
}

// withWorkspace resolves {id} (404 when unknown, or another tenant's) and
// counts the bytes that flow in and out of the workspace's backend.
func (s *Server) withWorkspace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wk, err := s.svc.Lookup(serviceCtx(r), tenantFrom(r.Context()), chi.URLParam(r, "id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		before := ww.BytesWritten()
		body := &countingReader{rc: r.Body}
		r.Body = body
		defer func() {
			s.metrics.bytesIn.WithLabelValues(wk.Backend()).Add(float64(body.n))
			s.metrics.bytesOut.WithLabelValues(wk.Backend()).Add(float64(ww.BytesWritten() - before))
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
