package broker

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/wsbroker/wsbroker/wire"
)

// processRoutes adds GET and DELETE /processes: the processes a
// workspace's commands left running (pi lets a command leave background
// children), for backends that can list them (opsapi.ProcessManager).
func processRoutes(r chi.Router, res workspacesResource) {
	r.Get("/processes", res.processes)
	r.Delete("/processes", res.killProcesses)
}

func (res workspacesResource) processes(w http.ResponseWriter, r *http.Request) {
	s := res.s
	ps, err := s.svc.Processes(serviceCtx(r), workspaceFrom(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.ProcessList{Processes: ps})
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
