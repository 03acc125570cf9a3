// Package wire is what travels over HTTP between the broker and its
// clients: the request and response bodies, the lines of the NDJSON
// streams, the RFC 9457 problem document and the one table of error codes.
//
// # Why a package of its own
//
// The broker (package broker) encodes these values and the Go client
// (package client) decodes them. Declaring them once means a field added
// on one side is on the other, and a client build does not pull in the
// broker, the tools or any backend. The package imports only the standard
// library and opsapi (itself standard-library only), whose FileInfo,
// ExecResult, Process and the glob and search types already are wire
// forms and are used as they are.
//
// # Error codes
//
// Every error response carries a stable code. Codes lists them: each code
// with its HTTP status and the opsapi kind a Go client sees. CodeOf is the
// server's direction (an error to its code), ForCode and ForStatus the
// client's (a code, or a bare status from a proxy, to its kind). The
// broker's own failures (a bad token, an unknown route, a malformed body,
// a tenant over its limits, a Host it does not answer for) are the
// sentinels ErrUnauthorized, ErrNotFound, ErrMethodNotAllowed,
// ErrUnsupportedMediaType, ErrBadRequest, ErrTooManyRequests and
// ErrMisdirected.
//
// # Checked against the OpenAPI document
//
// The broker's tests hold each schema of its OpenAPI document equal to the
// JSON fields of the type here, and a test in this package holds the pi
// integration's TypeScript interfaces equal to them too.
package wire
