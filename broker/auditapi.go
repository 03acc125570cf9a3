package broker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/wire"
)

// Audit read limits.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// readAudit serves GET /v1/audit: a tenant reads its own records, an admin
// all of them (or one tenant's with ?tenant=), and with
// ?trail=unauthenticated those of requests that failed authentication.
func (s *Server) readAudit(w http.ResponseWriter, r *http.Request) {
	t := tenantFrom(r.Context())
	q := r.URL.Query()
	limit := defaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			writeProblem(w, r, s.logger, invalid("audit", "", "query parameter \"limit\" must be 1 to %d, got %q", maxAuditLimit, v))
			return
		}
		limit = n
	}
	want, trail := q.Get("tenant"), q.Get("trail")
	if trail != "" && trail != "unauthenticated" {
		writeProblem(w, r, s.logger, invalid("audit", "", "query parameter \"trail\" must be \"unauthenticated\" or absent, got %q",
			trail))
		return
	}
	if want != "" && !t.Admin && want != t.Name || trail != "" && !t.Admin {
		// Not an error that tells the other tenant exists: just nothing.
		writeJSON(w, r, http.StatusOK, wire.AuditList{Records: []json.RawMessage{}})
		return
	}
	log, keep := s.audit, func(ev *audit.Event) bool {
		switch {
		case want != "":
			return ev.Tenant == want
		case t.Admin:
			return true
		}
		return ev.Tenant == t.Name
	}
	if trail != "" {
		// The trail of requests that failed authentication: no tenant's.
		log, keep = s.unauthLog.log, func(ev *audit.Event) bool { return ev.Tenant == "" }
	}
	recs, err := log.Read(keep, limit)
	if err != nil {
		writeProblem(w, r, s.logger, fmt.Errorf("reading the audit log: %w", err))
		return
	}
	writeJSON(w, r, http.StatusOK, wire.AuditList{Records: recs})
}
