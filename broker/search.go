package broker

import (
	"fmt"
	"net/http"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
)

func (res opsResource) glob(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	var req opsapi.GlobRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	fields := map[string]string{"pattern": req.Pattern, "cwd": req.Dir}
	for i, ig := range req.Ignore {
		fields[fmt.Sprintf("ignore[%d]", i)] = ig
	}
	if err := noNUL("glob", fields); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Args = &audit.Args{Path: req.Dir} })
	out, err := s.svc.Glob(serviceCtx(r), wk, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (res opsResource) search(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	var req opsapi.SearchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if err := noNUL("search", map[string]string{"pattern": req.Pattern, "path": req.Path, "glob": req.Glob}); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if req.Context < 0 {
		writeProblem(w, r, s.logger, invalid("search", "", "field \"context\" must be >= 0, got %d", req.Context))
		return
	}
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Args = &audit.Args{Path: req.Path} })
	out, err := s.svc.Search(serviceCtx(r), wk, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}
