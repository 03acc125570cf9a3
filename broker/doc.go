// Package broker is the HTTP layer: it serves the seven tools and the raw
// operations over /v1 by decoding each request, authenticating it,
// calling the workspace service (package workspaces) and encoding its
// answer. It owns no workspace and decides no policy.
//
// # Overview
//
// New builds a Server, and the workspaces.Service under it, over a set of
// opsapi.Backend values keyed by name.
// Handler returns the chi router with the one middleware stack (request id,
// request log, metrics, panic recovery), bearer authentication on /v1, and
// one sub-router per resource: workspaces, tools, and operations. Serve and
// ListenAndServe run it under an http.Server with ReadHeaderTimeout and
// header limits, and shut down gracefully when their context ends.
//
// The wire contract (routes, bodies, status codes, problem codes) is
// docs/api.md; the bodies are the types of package wire, shared with the
// Go client. The embedded OpenAPI 3.1 document (OpenAPI, served at
// /v1/openapi.json) describes the same routes; tests hold it valid, equal
// to the router, and its schemas equal to the wire types.
//
// # Errors
//
// Every error response is an RFC 9457 problem with a stable code. Handlers
// never choose a status: ToHTTP maps the opsapi kinds and the broker's own
// kinds (ErrUnauthorized, ErrNotFound, ErrMethodNotAllowed,
// ErrUnsupportedMediaType, ErrBadRequest, ErrTooManyRequests) by wire's
// one code table. Request bodies are
// size-limited before they are read (413), JSON bodies must be one JSON
// value without unknown fields or duplicate keys (400 with the field and
// offset), and a value no backend could take (a NUL byte in a path, an
// empty command, a negative timeout) is opsapi.ErrInvalid, so a Go client
// sees the same kind as in-process.
//
// # Commands and shutdown
//
// Exec calls and bash tool calls are tracked by the service: a client that
// disconnects cancels its command (the backend kills the whole tree),
// DELETE of a workspace cancels the workspace's commands before destroying
// it, and Shutdown cancels all of them and waits. Workspaces outlive the
// process; backends that implement opsapi.Rediscoverer hand them back at
// New. /readyz answers 503 while a backend that implements opsapi.Pinger
// does not answer.
//
// # Tenants, policy and audit
//
// Every /v1 request is authenticated to a tenant (tenancy.go): its
// workspaces are the only ones it can reach (another's is a 404 like a
// missing one), its rate and concurrency limits (the service's
// *workspaces.LimitError) answer 429 with Retry-After, and the service
// decides its policy before every tool call and raw operation and redacts
// results and streams. Every request is one record in the hash-chained
// audit log (package audit), written by a middleware; what the service
// learns for it (a denial, the workspace, an exit code) arrives through
// workspaces.Notes (service.go). The service writes each tool call's own
// record. Requests that fail authentication, and those the audit refuses
// before authentication, are the exception (unauth.go): bounded per peer
// and over all peers, they go to a trail of their own
// (Config.UnauthAudit), the excess counted in summary records. While the
// audit refuses calls only because its filesystem is full, a DELETE,
// which frees space, is still served, its record written into the audit's
// space reserve.
// docs/tenancy.md and docs/policy.md describe the behaviour.
//
// The generic hardening every route stands behind (JSON checks, the
// body budget, body pacing, connection caps, per-peer rates, the Host
// check) is package broker/httpguard; this package configures it and
// maps its errors to statuses.
//
// # Example
//
//	srv, err := broker.New(broker.Config{Tokens: []string{token}},
//		map[string]opsapi.Backend{"local": localBackend}, logger)
//	if err != nil {
//		return err
//	}
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	return srv.ListenAndServe(ctx)
package broker
