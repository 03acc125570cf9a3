package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker/httpguard"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// Bounds of GET /processes/{proc}/wait's timeout, in seconds.
const (
	defaultWaitSeconds = 30
	maxWaitSeconds     = 600
)

// processRoutes adds the processes of a workspace: GET and DELETE
// /processes for what its commands left running (backends that can list
// them, opsapi.ProcessManager), and background processes with handles:
// POST /processes starts one; /processes/{proc} describes (GET) or kills
// and forgets (DELETE) it, and its logs, wait, stdin and signal routes
// reattach to it.
func processRoutes(r chi.Router, res workspacesResource) {
	s := res.s
	r.Get("/processes", res.processes)
	r.Delete("/processes", res.killProcesses)
	r.With(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON).Post("/processes", res.startProcess)
	r.Route("/processes/{proc}", func(r chi.Router) {
		r.Get("/", res.getProcess)
		r.Delete("/", res.removeProcess)
		r.Get("/logs", res.processLogs)
		r.Get("/wait", res.waitProcess)
		r.With(s.limitBody(s.cfg.MaxUploadBytes)).Post("/stdin", res.writeStdin)
		r.Delete("/stdin", res.closeStdin)
		r.With(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON).Post("/signal", res.signalProcess)
	})
}

// processes lists both kinds: the backend's processes where it can list
// them, and the background processes.
func (res workspacesResource) processes(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	out := wire.ProcessList{Background: backgroundProcesses(s.svc.BackgroundProcesses(wk))}
	ps, err := s.svc.Processes(serviceCtx(r), wk)
	switch {
	case errors.Is(err, workspaces.ErrNotFound):
		// The backend cannot list its processes: the background ones
		// are still known.
	case err != nil:
		s.fail(w, r, err)
		return
	default:
		out.Processes = ps
	}
	writeJSON(w, r, http.StatusOK, out)
}

// killProcesses kills the processes named by repeated ?pid= parameters,
// or all of the workspace's when there are none.
func (res workspacesResource) killProcesses(w http.ResponseWriter, r *http.Request) {
	s := res.s
	var pids []int
	for _, v := range r.URL.Query()["pid"] {
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 {
			writeProblem(w, r, s.logger, badRequest("pid %q is not a positive integer", v))
			return
		}
		pids = append(pids, p)
	}
	n, err := s.svc.KillProcesses(serviceCtx(r), workspaceFrom(r.Context()), pids)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.KillResult{Killed: n})
}

func (res workspacesResource) startProcess(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	var body wire.StartProcessRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	req, err := execRequest(body.ExecRequest)
	if err == nil {
		err = noNUL("processes", map[string]string{"tag": body.Tag})
	}
	if err == nil && len(body.Tag) > maxTag {
		err = invalid("processes", "", "field \"tag\" is %d bytes; at most %d", len(body.Tag), maxTag)
	}
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	info, err := s.svc.StartProcess(serviceCtx(r), wk, workspaces.BackgroundRequest{Request: req, Tag: body.Tag, Stdin: body.Stdin})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/v1/workspaces/%s/processes/%s", wk.ID(), info.ID))
	writeJSON(w, r, http.StatusCreated, backgroundProcess(info))
}

// maxTag bounds a process's tag.
const maxTag = 256

// process resolves {proc}; answered with the problem when unknown.
func (res workspacesResource) process(w http.ResponseWriter, r *http.Request) (*bgproc.Process, bool) {
	p, err := res.s.svc.Process(workspaceFrom(r.Context()), chi.URLParam(r, "proc"))
	if err != nil {
		res.s.fail(w, r, err)
		return nil, false
	}
	return p, true
}

func (res workspacesResource) getProcess(w http.ResponseWriter, r *http.Request) {
	if p, ok := res.process(w, r); ok {
		writeJSON(w, r, http.StatusOK, backgroundProcess(p.Info()))
	}
}

func (res workspacesResource) removeProcess(w http.ResponseWriter, r *http.Request) {
	s := res.s
	info, err := s.svc.RemoveProcess(serviceCtx(r), workspaceFrom(r.Context()), chi.URLParam(r, "proc"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, backgroundProcess(info))
}

// waitProcess answers the process's Info once it has ended, or after
// ?timeout= seconds (default 30, at most 600) with it still running.
func (res workspacesResource) waitProcess(w http.ResponseWriter, r *http.Request) {
	s := res.s
	secs := float64(defaultWaitSeconds)
	if v := r.URL.Query().Get("timeout"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= maxWaitSeconds) {
			writeProblem(w, r, s.logger, invalid("wait", "", "query parameter \"timeout\" must be a number of seconds from 0 to %d, got %q", maxWaitSeconds, v))
			return
		}
		secs = f
	}
	p, ok := res.process(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(secs*float64(time.Second)))
	defer cancel()
	writeJSON(w, r, http.StatusOK, backgroundProcess(p.Wait(ctx)))
}

func (res workspacesResource) signalProcess(w http.ResponseWriter, r *http.Request) {
	s := res.s
	var body wire.SignalRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Args = &audit.Args{Command: body.Signal} })
	err := s.svc.SignalProcess(serviceCtx(r), workspaceFrom(r.Context()), chi.URLParam(r, "proc"), strings.ToUpper(body.Signal))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeStdin streams the body into the process's stdin; ?close=true
// closes it after.
func (res workspacesResource) writeStdin(w http.ResponseWriter, r *http.Request) {
	s := res.s
	closeAfter, err := boolParam(r, "close", "stdin")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	body := &uploadBody{r: r.Body}
	n, err := s.svc.WriteStdin(serviceCtx(r), workspaceFrom(r.Context()), chi.URLParam(r, "proc"), body, closeAfter)
	if body.overflow != nil {
		err = fmt.Errorf("stdin write larger than %d bytes: %w", s.cfg.MaxUploadBytes, body.overflow)
	}
	if pb := httpguard.PacerFrom(r.Context()); pb != nil && pb.Slow() != nil {
		err = fmt.Errorf("%w: stdin write: %w", ErrBadRequest, pb.Slow())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.StdinResult{Written: n})
}

func (res workspacesResource) closeStdin(w http.ResponseWriter, r *http.Request) {
	p, ok := res.process(w, r)
	if !ok {
		return
	}
	if err := p.CloseStdin(); err != nil {
		res.s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// backgroundProcess is a background process as the wire describes it.
func backgroundProcess(i bgproc.Info) wire.BackgroundProcess {
	p := wire.BackgroundProcess{
		ID: i.ID, Tag: i.Tag, Command: i.Command, Cwd: i.Cwd, State: i.State,
		StartedAt: i.StartedAt, Result: i.Result, Error: i.Error, Stdin: i.Stdin,
		Output: wire.LogSpan{First: i.Output.First, Written: i.Output.Written},
	}
	if !i.EndedAt.IsZero() {
		p.EndedAt = &i.EndedAt
	}
	if u := i.Usage; u != nil {
		p.Usage = &wire.ProcessUsage{CPUNs: u.CPU.Nanoseconds(), MemoryBytes: u.MemoryBytes}
	}
	return p
}

func backgroundProcesses(infos []bgproc.Info) []wire.BackgroundProcess {
	out := make([]wire.BackgroundProcess, len(infos))
	for i, info := range infos {
		out[i] = backgroundProcess(info)
	}
	return out
}
