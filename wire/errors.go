package wire

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/wsbroker/wsbroker/opsapi"
)

// The broker's own error kinds, beside opsapi's. A handler wraps one of
// them (or an opsapi kind) and CodeOf picks the code and status.
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
	// ErrTooManyRequests: a tenant over its request rate or its concurrent
	// calls; the answer carries Retry-After.
	ErrTooManyRequests = errors.New("too many requests")
	// ErrMisdirected: a Host header the broker does not answer for (a DNS
	// rebinding page naming its own domain).
	ErrMisdirected = errors.New("misdirected request")
)

// StatusClientClosedRequest is the non-standard status (nginx's) for a call
// the client canceled; the client never sees it, but logs and metrics do.
const StatusClientClosedRequest = 499

// Code is one stable error code with what it means on each side.
type Code struct {
	// Name is the code in a problem document, e.g. "not_exist".
	Name string
	// Status is the HTTP status an error with this code is answered with.
	Status int
	// Kind is the opsapi kind a Go client gives the error, so that
	// errors.Is(err, opsapi.ErrNotExist) holds across the wire; nil for
	// "internal".
	Kind error

	// match selects the code on the server: one of the broker's own
	// sentinels, or the opsapi kind itself.
	match error
}

// ownCodes are the broker's own failures, tested before the opsapi kinds
// because such an error may wrap one of those too.
var ownCodes = []Code{
	{"unauthorized", http.StatusUnauthorized, opsapi.ErrPermission, ErrUnauthorized},
	// An unknown workspace, tool or route: nothing by that name.
	{"not_found", http.StatusNotFound, opsapi.ErrNotExist, ErrNotFound},
	{"method_not_allowed", http.StatusMethodNotAllowed, opsapi.ErrInvalid, ErrMethodNotAllowed},
	{"unsupported_media_type", http.StatusUnsupportedMediaType, opsapi.ErrInvalid, ErrUnsupportedMediaType},
	{"bad_request", http.StatusBadRequest, opsapi.ErrInvalid, ErrBadRequest},
	// A tenant's rate or concurrency limit: retryable, like any
	// temporarily unavailable backend.
	{"too_many_requests", http.StatusTooManyRequests, opsapi.ErrUnavailable, ErrTooManyRequests},
	{"misdirected_request", http.StatusMisdirectedRequest, opsapi.ErrInvalid, ErrMisdirected},
}

// kindStatus is the status of each opsapi kind. Codes follow opsapi.Kinds
// order, so where kinds share a status the first (exists for 409,
// permission for 403) is what that bare status means to a client.
var kindStatus = map[error]int{
	opsapi.ErrNotExist:    http.StatusNotFound,
	opsapi.ErrExist:       http.StatusConflict,
	opsapi.ErrPermission:  http.StatusForbidden,
	opsapi.ErrIsDir:       http.StatusConflict,
	opsapi.ErrNotDir:      http.StatusConflict,
	opsapi.ErrInvalid:     http.StatusBadRequest,
	opsapi.ErrTimeout:     http.StatusGatewayTimeout,
	opsapi.ErrCanceled:    StatusClientClosedRequest,
	opsapi.ErrDenied:      http.StatusForbidden,
	opsapi.ErrTooLarge:    http.StatusRequestEntityTooLarge,
	opsapi.ErrUnavailable: http.StatusServiceUnavailable,
}

// internal is the code of an error of no known kind.
var internal = Code{Name: "internal", Status: http.StatusInternalServerError}

// codes is the one table: the broker's own codes, one per opsapi kind
// (named by opsapi.Code), then internal.
var codes = buildCodes()

func buildCodes() []Code {
	out := append([]Code(nil), ownCodes...)
	for _, k := range opsapi.Kinds {
		st, ok := kindStatus[k]
		if !ok {
			panic(fmt.Sprintf("wire: opsapi kind %q has no status", k))
		}
		out = append(out, Code{Name: opsapi.Code(k), Status: st, Kind: k, match: k})
	}
	return append(out, internal)
}

// Codes returns every error code in a stable order: the broker's own, then
// one per opsapi kind, then "internal".
func Codes() []Code { return append([]Code(nil), codes...) }

// CodeOf returns the code of a non-nil err: one of the broker's own when
// err wraps its sentinel, too_large for a body over http.MaxBytesReader's
// limit, the code of err's opsapi kind (opsapi.KindOf, so OS and context
// errors count), and internal otherwise.
func CodeOf(err error) Code {
	for _, c := range ownCodes {
		if errors.Is(err, c.match) {
			return c
		}
	}
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		return forKind(opsapi.ErrTooLarge)
	}
	if k := opsapi.KindOf(err); k != nil {
		return forKind(k)
	}
	return internal
}

// forKind returns the code of an opsapi kind.
func forKind(kind error) Code {
	for _, c := range codes {
		if c.match == kind {
			return c
		}
	}
	return internal
}

// ForCode returns the code named name; ok is false for a name no version
// of the table knows.
func ForCode(name string) (c Code, ok bool) {
	for _, c := range codes {
		if c.Name == name {
			return c, true
		}
	}
	return Code{}, false
}

// ForStatus returns the code a response of status without a known code
// stands for: the first code of that status, so 409 is "exists" and 403
// "permission". ok is false for a status no code has.
func ForStatus(status int) (c Code, ok bool) {
	if status == http.StatusBadGateway {
		// A proxy in front of the broker that cannot reach it.
		status = http.StatusServiceUnavailable
	}
	for _, c := range codes {
		if c.Status == status {
			return c, true
		}
	}
	return Code{}, false
}
