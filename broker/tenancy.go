package broker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

const (
	tenantKey ctxKey = iota + 100
	auditKey
)

// tenantFrom returns the authenticated tenant of a /v1 request.
func tenantFrom(ctx context.Context) *tenant.Tenant {
	t, _ := ctx.Value(tenantKey).(*tenant.Tenant)
	return t
}

// reqAudit collects what the handlers learn about a request, for its
// audit record.
type reqAudit struct {
	mu   sync.Mutex
	ev   audit.Event
	body *hashingReader
	// skipped: nothing is recorded (an unauthenticated request past its
	// peer's budget or the global one: it is counted instead).
	skipped bool
	// unauth: the request failed authentication; its record goes to the
	// trail of those (unauthTrail).
	unauth bool
}

// unauthenticated sends this request's record to the trail of requests
// that failed authentication.
func (ra *reqAudit) unauthenticated() {
	if ra == nil {
		return
	}
	ra.mu.Lock()
	ra.unauth = true
	ra.mu.Unlock()
}

// skip records nothing for this request.
func (ra *reqAudit) skip() {
	if ra == nil {
		return
	}
	ra.mu.Lock()
	ra.skipped = true
	ra.mu.Unlock()
}

func (ra *reqAudit) set(fn func(ev *audit.Event)) {
	if ra == nil {
		return
	}
	ra.mu.Lock()
	fn(&ra.ev)
	ra.mu.Unlock()
}

func reqAuditFrom(ctx context.Context) *reqAudit {
	ra, _ := ctx.Value(auditKey).(*reqAudit)
	return ra
}

// peerIP is the connection's address: X-Forwarded-For and its kind are
// never read, a client can write anything there.
func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// hashingReader counts and hashes the request body as the handler reads
// it, so the record has a digest of what was sent without keeping it.
type hashingReader struct {
	rc io.ReadCloser
	h  hash.Hash
	n  int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.rc.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashingReader) Close() error { return h.rc.Close() }

// auditRequests writes one record per /v1 request once it is answered,
// authenticated or not.
func (s *Server) auditRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		body := &hashingReader{rc: r.Body, h: sha256.New()}
		r.Body = body
		ra := &reqAudit{body: body, ev: audit.Event{
			AuditID:                  newAuditID(),
			RequestID:                middleware.GetReqID(r.Context()),
			Stage:                    audit.StageResponseComplete,
			SourceIP:                 peerIP(r),
			Verb:                     r.Method,
			RequestReceivedTimestamp: start.UTC(),
		}}
		defer func() {
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			ra.mu.Lock()
			ev, skipped, unauth := ra.ev, ra.skipped, ra.unauth
			ra.mu.Unlock()
			if skipped {
				return
			}
			ev.Route = routePattern(r)
			if ev.Args == nil {
				ev.Args = &audit.Args{}
			}
			if p := r.URL.Query().Get("path"); p != "" && ev.Args.Path == "" {
				ev.Args.Path = p
			}
			ev.Args.Digest = audit.Digest([]byte(r.Method), []byte(r.URL.Path), []byte(r.URL.RawQuery), body.h.Sum(nil))
			if ev.Decision == "" {
				ev.Decision = "allow"
				if status == http.StatusUnauthorized {
					ev.Decision, ev.Rule, ev.Reason = "deny", "authentication", "no valid bearer token"
				}
			}
			if ev.Result == nil {
				ev.Result = &audit.Result{}
			}
			ev.Result.Status, ev.Result.BytesIn, ev.Result.BytesOut = status, body.n, int64(ww.BytesWritten())
			now := time.Now()
			ev.StageTimestamp, ev.DurationNs = now.UTC(), int64(now.Sub(start))
			if unauth {
				s.unauthLog.write(ev)
				return
			}
			s.record(ev)
		}()
		if err := s.audit.Ready(); err != nil && !admitOnLowSpace(r, err) {
			// Fail closed: what cannot be recorded is not run. Not yet
			// authenticated, the refusal is recorded as the 401s are.
			ra.ev.Decision, ra.ev.Rule, ra.ev.Reason = "deny", "audit", "the audit trail cannot be written"
			if s.unauthLog.admit(start) {
				ra.unauth = true
			} else {
				ra.skipped = true
				s.unauthLog.count(start, countedRefused)
			}
			ww.Header().Set("Retry-After", "10")
			s.logger.Error("refusing a request: the audit trail cannot be written", "err", err)
			writeProblem(ww, r, s.logger, fmt.Errorf("%w: the audit trail cannot be written, so no call is served",
				opsapi.ErrUnavailable))
			return
		}
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), auditKey, ra)))
	})
}

// admitOnLowSpace reports whether a request the audit refused may run
// all the same: a DELETE (a workspace, a process and its log, a
// session), which frees space, when the refusal is only that the
// filesystem is full. Its record goes into the audit's space reserve, so
// a tenant who filled the disk cannot also keep everyone from freeing it.
func admitOnLowSpace(r *http.Request, refusal error) bool {
	return r.Method == http.MethodDelete && errors.Is(refusal, syscall.ENOSPC)
}

// auditDenial marks the request's record as denied.
func auditDenial(r *http.Request, rule, reason string) {
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) {
		ev.Decision, ev.Rule, ev.Reason = "deny", rule, reason
	})
}

// limit applies the tenant's request rate and concurrency: past either,
// 429 with Retry-After, and only that tenant is held back.
func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leave, err := s.svc.Enter(tenantFrom(r.Context()))
		var le *workspaces.LimitError
		if errors.As(err, &le) {
			s.tooMany(w, r, le.Rule, le.RetryAfter, le.Reason)
			return
		}
		if isMCPStream(r) {
			leave() // a session-long stream holds no call slot
		} else {
			defer leave()
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) tooMany(w http.ResponseWriter, r *http.Request, rule string, wait time.Duration, reason string) {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	auditDenial(r, rule, reason)
	writeProblem(w, r, s.logger, fmt.Errorf("%w: %s", ErrTooManyRequests, reason))
}

// record writes an audit event and counts a denial.
func (s *Server) record(ev audit.Event) { s.svc.Record(ev) }

// newAuditID returns a fresh audit id (see workspaces.NewAuditID).
func newAuditID() string { return workspaces.NewAuditID() }
