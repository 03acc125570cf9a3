package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
)

// logRequests logs one structured record per request, with the request id.
// It logs the path but never the query string (a client may have put a
// token there) nor any header.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		id := middleware.GetReqID(r.Context())
		ww.Header().Set("X-Request-Id", id)
		defer func() {
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			s.logger.LogAttrs(r.Context(), levelFor(status), "request",
				slog.String("request_id", id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("route", routePattern(r)),
				slog.Int("status", status),
				slog.Int("bytes", ww.BytesWritten()),
				slog.Duration("duration", time.Since(start)),
				slog.String("remote", r.RemoteAddr),
			)
		}()
		next.ServeHTTP(ww, r)
	})
}

// recoverer turns a handler panic into a 500 problem and a logged stack;
// http.ErrAbortHandler (a deliberately broken stream) passes through.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared by identity, as net/http does
				panic(v)
			}
			s.logger.Error("handler panic", "request_id", middleware.GetReqID(r.Context()),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if r.Header.Get("Connection") != "Upgrade" {
				writeProblem(w, r, s.logger, fmt.Errorf("internal error (request %s)", middleware.GetReqID(r.Context())))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authenticate requires a known bearer token in the Authorization header.
// Every configured token of every tenant is compared, in constant time
// over SHA-256 hashes (tenant.Registry.Authenticate), so neither the
// match nor the token's length leaks through timing. The tenant goes into
// the request's context; nothing else (no header) names it. A token in the query string is refused outright: URLs end up in
// logs and browser histories.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if queryHasKey(r.URL.RawQuery, "access_token", "token") {
			s.unauthorized(w, r, "bearer tokens are not accepted in the query string; use the Authorization header")
			return
		}
		h := r.Header.Get("Authorization")
		if h == "" {
			s.unauthorized(w, r, "missing Authorization header")
			return
		}
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			s.unauthorized(w, r, "the Authorization header must be \"Bearer <token>\"")
			return
		}
		t := s.svc.Tenants().Authenticate(strings.TrimSpace(tok))
		if t == nil {
			s.unauthorized(w, r, "invalid bearer token")
			return
		}
		reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Tenant = t.Name })
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey, t)))
	})
}

// queryHasKey reports whether the query has a parameter named one of
// names, as url.ParseQuery would decode it, decoding only the keys: an
// unauthenticated request's 60 KiB query fully decoded was a tenth of the
// broker's CPU under a flood of them.
func queryHasKey(raw string, names ...string) bool {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			continue // url.ParseQuery drops such a pair
		}
		key, _, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(key, "%+") {
			var err error
			if key, err = url.QueryUnescape(key); err != nil {
				continue
			}
		}
		if slices.Contains(names, key) {
			return true
		}
	}
	return false
}

// unauthorized answers 401, or 429 when the peer is past its budget of
// failed authentications. The 401 is recorded by itself within the global
// budget of such records, in their own trail; past it, and a 429 always,
// it is only counted in a summary record (unauthTrail).
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, detail string) {
	now, ra := time.Now(), reqAuditFrom(r.Context())
	if ok, wait := s.unauth.Allow(peerIP(r), now); !ok {
		ra.skip()
		s.unauthLog.count(now, countedTooMany)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		writeProblem(w, r, s.logger, fmt.Errorf("%w: too many requests without a valid bearer token from %s",
			ErrTooManyRequests, peerIP(r)))
		return
	}
	if s.unauthLog.admit(now) {
		ra.unauthenticated()
	} else {
		ra.skip()
		s.unauthLog.count(now, countedOverBudget)
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="wsbroker"`)
	writeProblem(w, r, s.logger, fmt.Errorf("%w: %s", ErrUnauthorized, detail))
}

// limitBody answers 413 at once when the declared length exceeds n, and
// otherwise caps the body at n bytes, so no handler ever buffers more.
func (s *Server) limitBody(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				writeProblem(w, r, s.logger, fmt.Errorf("request body of %d bytes is larger than %d bytes: %w",
					r.ContentLength, n, &http.MaxBytesError{Limit: n}))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}

// requireJSON refuses a body declared as anything but JSON with 415. A
// body without a Content-Type is read as JSON.
func (s *Server) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
				writeProblem(w, r, s.logger, fmt.Errorf("%w: Content-Type %q; this route takes application/json",
					ErrUnsupportedMediaType, ct))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// notFound answers an unknown route as a problem.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, s.logger, fmt.Errorf("%w: no route %s %s", ErrNotFound, r.Method, r.URL.Path))
}

// answer405 lets chi answer a known route asked with the wrong method: its
// router knows the route's methods and sets the Allow header from them.
// chi's answer has no body; answer405 writes the problem instead, with
// the Allow values in a stable order.
func (s *Server) answer405(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&allowWriter{ResponseWriter: w, s: s, r: r}, r)
	})
}

// allowWriter turns chi's bare 405 into a problem document.
type allowWriter struct {
	http.ResponseWriter
	s        *Server
	r        *http.Request
	answered bool // the problem is written: drop chi's (empty) body
}

// allowOrder is the order of the methods in an Allow header.
var allowOrder = map[string]int{
	http.MethodGet: 0, http.MethodHead: 1, http.MethodPut: 2, http.MethodPost: 3,
	http.MethodPatch: 4, http.MethodDelete: 5, http.MethodOptions: 6,
}

func (a *allowWriter) WriteHeader(status int) {
	h := a.Header()
	// chi's own 405 sets no Content-Type; the broker's problems all do.
	if status != http.StatusMethodNotAllowed || a.answered || h.Get("Content-Type") != "" {
		a.ResponseWriter.WriteHeader(status)
		return
	}
	a.answered = true
	allow := h.Values("Allow")
	sort.SliceStable(allow, func(i, j int) bool { return allowOrder[allow[i]] < allowOrder[allow[j]] })
	h["Allow"] = allow
	writeProblem(a.ResponseWriter, a.r, a.s.logger, fmt.Errorf("%w: %s %s", ErrMethodNotAllowed, a.r.Method, a.r.URL.Path))
}

func (a *allowWriter) Write(p []byte) (int, error) {
	if a.answered {
		return len(p), nil
	}
	return a.ResponseWriter.Write(p)
}

// ReadFrom keeps the copy of a file body as fast as without the wrapper.
func (a *allowWriter) ReadFrom(src io.Reader) (int64, error) {
	if a.answered {
		return io.Copy(io.Discard, src)
	}
	return io.Copy(a.ResponseWriter, src)
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (a *allowWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// levelFor logs server failures as errors and the rest as info.
func levelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}
