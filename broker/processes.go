package broker

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// processRoutes adds GET and DELETE /processes: the processes a
// workspace's commands left running (pi lets a command leave background
// children), for backends that can list them (opsapi.ProcessManager).
func processRoutes(r chi.Router, res workspacesResource) {
	r.Get("/processes", res.processes)
	r.Delete("/processes", res.killProcesses)
}

// processManager is the workspace's ProcessManager, or answers 404.
func (res workspacesResource) processManager(w http.ResponseWriter, r *http.Request) (opsapi.ProcessManager, *workspace, bool) {
	wk := workspaceFrom(r.Context())
	pm, ok := ability[opsapi.ProcessManager](wk)
	if !ok {
		writeProblem(w, r, res.s.logger, unsupported(wk, "processes"))
	}
	return pm, wk, ok
}

func (res workspacesResource) processes(w http.ResponseWriter, r *http.Request) {
	s := res.s
	pm, _, ok := res.processManager(w, r)
	if !ok {
		return
	}
	ps, err := pm.Processes(r.Context())
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if ps == nil {
		ps = []opsapi.Process{}
	}
	writeJSON(w, r, http.StatusOK, wire.ProcessList{Processes: ps})
}

// killProcesses kills the processes named by repeated ?pid= parameters,
// or all of the workspace's when there are none.
func (res workspacesResource) killProcesses(w http.ResponseWriter, r *http.Request) {
	s := res.s
	pm, wk, ok := res.processManager(w, r)
	if !ok {
		return
	}
	var pids []int
	for _, v := range r.URL.Query()["pid"] {
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 {
			writeProblem(w, r, s.logger, badRequest("pid %q is not a positive integer", v))
			return
		}
		pids = append(pids, p)
	}
	n, err := pm.KillProcesses(r.Context(), pids)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	s.logger.Info("processes killed", "workspace", wk.id, "pids", pids, "killed", n)
	writeJSON(w, r, http.StatusOK, wire.KillResult{Killed: n})
}
