package broker

import (
	"net/http"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

func (res opsResource) stat(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "stat")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var mode opsapi.AccessMode
	switch a := r.URL.Query().Get("access"); a {
	case "":
	case "r":
		mode = opsapi.AccessRead
	case "w":
		mode = opsapi.AccessWrite
	case "rw":
		mode = opsapi.AccessRead | opsapi.AccessWrite
	default:
		writeProblem(w, r, s.logger, invalid("stat", "", "query parameter \"access\" must be r, w or rw, got %q", a))
		return
	}
	fi, head, err := s.svc.Stat(serviceCtx(r), wk, p, mode)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.StatResponse{FileInfo: fi}
	if mt := http.DetectContentType(head); len(head) > 0 && strings.HasPrefix(mt, "image/") {
		out.MIME = mt
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (res opsResource) realpath(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "realpath")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	rp, err := s.svc.RealPath(serviceCtx(r), wk, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.RealPathResponse{Path: rp})
}
