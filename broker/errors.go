package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/opsapi"
)

// The broker's own error kinds, beside opsapi's. Handlers wrap them (or an
// opsapi kind) and never choose a status themselves: ToHTTP does.
var (
	// ErrUnauthorized: a missing, malformed or unknown bearer token.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound: an unknown workspace, tool or route, or an operation the
	// workspace does not serve.
	ErrNotFound = errors.New("not found")
	// ErrMethodNotAllowed: a known route asked with the wrong method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrUnsupportedMediaType: a JSON route given a body that says it is
	// something else.
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	// ErrBadRequest: a body that is not the JSON the route expects
	// (malformed, unknown field, wrong type, duplicate key, trailing data).
	ErrBadRequest = errors.New("bad request")
	// ErrTooManyRequests: a tenant over its request rate or its
	// concurrent calls; the answer carries Retry-After.
	ErrTooManyRequests = errors.New("too many requests")
)

// StatusClientClosedRequest is the non-standard status (nginx's) for a call
// the client canceled; the client never sees it, but logs and metrics do.
const StatusClientClosedRequest = 499

// ToHTTP maps an error to its HTTP status and the stable problem code. It is
// the only place in the broker where an error picks a status.
func ToHTTP(err error) (status int, code string) {
	var maxBytes *http.MaxBytesError
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, ErrMethodNotAllowed):
		return http.StatusMethodNotAllowed, "method_not_allowed"
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, "unsupported_media_type"
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, ErrTooManyRequests):
		return http.StatusTooManyRequests, "too_many_requests"
	case errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge, "too_large"
	}
	code = opsapi.Code(err)
	switch opsapi.KindOf(err) {
	case opsapi.ErrNotExist:
		return http.StatusNotFound, code
	case opsapi.ErrExist, opsapi.ErrIsDir, opsapi.ErrNotDir:
		return http.StatusConflict, code
	case opsapi.ErrPermission, opsapi.ErrDenied:
		return http.StatusForbidden, code
	case opsapi.ErrInvalid:
		return http.StatusBadRequest, code
	case opsapi.ErrTooLarge:
		return http.StatusRequestEntityTooLarge, code
	case opsapi.ErrTimeout:
		return http.StatusGatewayTimeout, code
	case opsapi.ErrCanceled:
		return StatusClientClosedRequest, code
	case opsapi.ErrUnavailable:
		return http.StatusServiceUnavailable, code
	}
	return http.StatusInternalServerError, "internal"
}

// problemTypeBase prefixes the problem code to form the RFC 9457 type URI.
const problemTypeBase = "https://wsbroker.dev/problems/"

// Problem is the RFC 9457 body of every error response.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// NewProblem builds the problem document for err.
func NewProblem(err error) Problem {
	status, code := ToHTTP(err)
	title := http.StatusText(status)
	if status == StatusClientClosedRequest {
		title = "Client Closed Request"
	}
	return Problem{
		Type:   problemTypeBase + code,
		Title:  title,
		Status: status,
		Detail: err.Error(),
		Code:   code,
	}
}

// writeProblem answers err as application/problem+json. Server-side
// failures are logged with the request id; client mistakes only at debug.
func writeProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	p := NewProblem(err)
	level := slog.LevelDebug
	if p.Status >= 500 {
		level = slog.LevelError
	}
	logger.Log(r.Context(), level, "request failed",
		"request_id", middleware.GetReqID(r.Context()), "status", p.Status, "code", p.Code, "err", err)
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// badRequest wraps a message as an ErrBadRequest.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// invalid wraps a message as opsapi.ErrInvalid, so a Go client sees the same
// kind a backend would have returned for the same bad value.
func invalid(op, path, format string, args ...any) error {
	return opsapi.E(op, path, opsapi.ErrInvalid, fmt.Errorf(format, args...))
}
