package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/opsapi"
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

// CreateRequest is the body of POST /v1/workspaces.
type CreateRequest struct {
	// Backend names the backend; empty means the configured default.
	Backend string `json:"backend,omitempty"`
	// Options are the backend's own creation options.
	Options json.RawMessage `json:"options,omitempty"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
}

func (res workspacesResource) create(w http.ResponseWriter, r *http.Request) {
	s := res.s
	data, err := s.readBody(w, r)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var req CreateRequest
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
	wk := s.add(id, req.Backend, ws, time.Now())
	s.logger.Info("workspace created", "workspace", id, "backend", req.Backend, "root", ws.Root(),
		"request_id", middleware.GetReqID(r.Context()))
	w.Header().Set("Location", "/v1/workspaces/"+id)
	writeJSON(w, r, http.StatusCreated, wk.info())
}

func (res workspacesResource) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, WorkspaceList{Workspaces: res.s.list()})
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
		wk, err := s.lookup(chi.URLParam(r, "id"))
		if err != nil {
			writeProblem(w, r, s.logger, err)
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
