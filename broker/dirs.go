package broker

import (
	"net/http"

	"github.com/wsbroker/wsbroker/wire"
)

func (res opsResource) readDir(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "readdir")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	entries, hidden, err := s.svc.ReadDir(serviceCtx(r), wk, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.DirList{Entries: entries, Hidden: hidden})
}

func (res opsResource) mkdir(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "mkdir")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if err := s.svc.Mkdir(serviceCtx(r), wk, p); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
