package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

// ndjson is the media type of the streaming responses.
const ndjson = "application/x-ndjson"

// toolsResource serves /v1/workspaces/{id}/tools.
type toolsResource struct{ s *Server }

// Routes returns the batch route and the single-call route.
func (res toolsResource) Routes() chi.Router {
	s := res.s
	r := chi.NewRouter()
	r.Use(s.limitBody(s.cfg.MaxToolBody), s.requireJSON)
	r.Post("/", res.batch)
	r.Post("/{name}", res.call)
	return r
}

// call runs one tool. The body is the tool's arguments: anything that is
// JSON goes to the tool, whose own validation turns bad arguments into an
// isError result the model can read and retry; only a body that is not
// JSON at all is a 400.
func (res toolsResource) call(w http.ResponseWriter, r *http.Request) {
	s := res.s
	wk := workspaceFrom(r.Context())
	name := chi.URLParam(r, "name")
	if !wk.HasTool(name) {
		writeProblem(w, r, s.logger, fmt.Errorf("tool %q in workspace %s: %w", name, wk.ID(), ErrNotFound))
		return
	}
	args, err := s.readJSON(w, r)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	ctx := serviceCtx(r)
	if !acceptsNDJSON(r) {
		result, err := s.svc.RunTool(ctx, wk, 1, name, args, nil)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, r, http.StatusOK, result)
		return
	}
	// Streaming: updates go out as they come, each line flushed. The
	// status goes out with the first line, so a call that could not start
	// is still answered as a problem.
	lw := newLineWriter(w)
	result, err := s.svc.RunTool(ctx, wk, 1, name, args, func(u tools.Result) {
		lw.write(wire.StreamLine{Type: "update", Result: u})
	})
	if err != nil && !lw.started {
		s.fail(w, r, err)
		return
	}
	lw.last(wire.StreamLine{Type: wire.LineResult, Result: result})
}

// acceptsNDJSON reports whether the client asked for the streaming form.
func acceptsNDJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == ndjson {
			return true
		}
	}
	return false
}

// batch runs several calls, as pi's agent loop runs the tool calls of one
// assistant message. An unknown tool or bad arguments give that call an
// isError result (the toolbox's own texts); the others still run.
func (res toolsResource) batch(w http.ResponseWriter, r *http.Request) {
	s := res.s
	wk := workspaceFrom(r.Context())
	var req wire.BatchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	switch {
	case req.Mode == "":
		req.Mode = wire.Parallel
	case req.Mode != wire.Parallel && req.Mode != wire.Sequential:
		writeProblem(w, r, s.logger, badRequest("field \"mode\": must be \"parallel\" or \"sequential\", got %q", req.Mode))
		return
	}
	if len(req.Calls) > s.cfg.MaxBatchCalls {
		writeProblem(w, r, s.logger, badRequest("field \"calls\": %d calls, at most %d allowed", len(req.Calls), s.cfg.MaxBatchCalls))
		return
	}
	results, err := res.runBatch(serviceCtx(r), wk, tenantFrom(r.Context()), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.BatchResponse{Results: results})
}

// runBatch runs a batch's calls. Each counts against the tenant's limits
// as a request would: the calls after the first are charged against its
// rate at the start, and one over it is refused (an isError result,
// audited as rule "rate"); and the batch runs at most as many calls at
// once as it holds call slots (its request's and those free now, up to
// concurrentCalls in all), the others waiting their turn in the batch.
func (res toolsResource) runBatch(ctx context.Context, wk *workspaces.Workspace, t *tenant.Tenant, req wire.BatchRequest) ([]wire.BatchResult, error) {
	s := res.s
	calls := make([]workspaces.ToolCall, len(req.Calls))
	for i, c := range req.Calls {
		calls[i] = workspaces.ToolCall{Name: c.Name, Args: c.Arguments}
		if len(c.Arguments) == 0 {
			calls[i].Args = json.RawMessage("{}")
		}
		var le *workspaces.LimitError
		if i > 0 && errors.As(s.svc.ChargeCall(t), &le) {
			calls[i].Refused = le
		}
	}
	schedule := func(run func(int)) {
		for i := range calls {
			run(i)
		}
	}
	if req.Mode != wire.Sequential {
		schedule = func(run func(int)) {
			extra, leave := s.svc.EnterBatch(t, len(calls)-1)
			defer leave()
			slots := make(chan struct{}, 1+extra)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					slots <- struct{}{}
					defer func() { <-slots }()
					run(i)
				})
			}
			wg.Wait()
		}
	}
	out, err := s.svc.RunBatch(ctx, wk, calls, schedule)
	if err != nil {
		return nil, err
	}
	results := make([]wire.BatchResult, len(out))
	for i, c := range req.Calls {
		results[i] = wire.BatchResult{ID: c.ID, Name: c.Name, Result: out[i]}
	}
	return results, nil
}

// lineWriter writes NDJSON lines and flushes each, so a client sees every
// update as it happens. After a write fails (the client left) it drops the
// rest; the request context ends the work itself.
type lineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool // the status and headers are written
	failed  bool
}

func newLineWriter(w http.ResponseWriter) *lineWriter {
	return &lineWriter{w: w, rc: http.NewResponseController(w)}
}

func (lw *lineWriter) write(v any) {
	lw.put(v)
	lw.flush()
}

// writeRaw writes line, a whole NDJSON line with its newline, and
// flushes it.
func (lw *lineWriter) writeRaw(line []byte) {
	lw.send(line)
	lw.flush()
}

func (lw *lineWriter) flush() {
	if lw.failed {
		return
	}
	if err := lw.rc.Flush(); err != nil {
		lw.failed = true
	}
}

// last writes the stream's final line without flushing it: net/http sends
// it with the stream's end once the handler returns, in one write, so the
// client (which reads to the end to keep the connection) wakes once for
// both instead of twice.
func (lw *lineWriter) last(v any) { lw.put(v) }

func (lw *lineWriter) put(v any) {
	if lw.failed {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the broker's own line types get here
	}
	lw.send(append(b, '\n'))
}

// send writes a whole line, unflushed, after the stream's status and
// headers when it is the first; a failure drops the rest.
func (lw *lineWriter) send(line []byte) {
	if lw.failed {
		return
	}
	if !lw.started {
		lw.started = true
		lw.w.Header().Set("Content-Type", ndjson)
		lw.w.Header().Set("X-Content-Type-Options", "nosniff")
		lw.w.WriteHeader(http.StatusOK)
	}
	if _, err := lw.w.Write(line); err != nil {
		lw.failed = true
	}
}
