package broker

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// The broker's own error kinds, beside opsapi's: the sentinels of the one
// code table in package wire, named here for the handlers that wrap them.
// Handlers never choose a status themselves: ToHTTP does.
var (
	ErrUnauthorized         = wire.ErrUnauthorized
	ErrNotFound             = wire.ErrNotFound
	ErrMethodNotAllowed     = wire.ErrMethodNotAllowed
	ErrUnsupportedMediaType = wire.ErrUnsupportedMediaType
	ErrBadRequest           = wire.ErrBadRequest
	ErrTooManyRequests      = wire.ErrTooManyRequests
	ErrMisdirected          = wire.ErrMisdirected
)

// ToHTTP maps an error to its HTTP status and the stable problem code, by
// wire's one table. It is the only place in the broker where an error
// picks a status.
func ToHTTP(err error) (status int, code string) {
	if err == nil {
		return http.StatusOK, ""
	}
	c := wire.CodeOf(err)
	return c.Status, c.Name
}

// writeProblem answers err as application/problem+json. Server-side
// failures are logged with the request id; client mistakes only at debug.
func writeProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	p := wire.NewProblem(err)
	level := slog.LevelDebug
	if p.Status >= 500 {
		level = slog.LevelError
	}
	logger.Log(r.Context(), level, "request failed",
		"request_id", middleware.GetReqID(r.Context()), "status", p.Status, "code", p.Code, "err", err)
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", wire.ProblemMediaType)
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
