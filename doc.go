// Package wsbroker is a sandboxed remote workspace broker for AI coding agents.
//
// # Overview
//
// Agents act through seven tools (read, write, edit, bash, grep, find, ls).
// The broker runs every tool's effect inside a sandbox the host does not
// have to trust, behind an HTTP API.
//
// # Layout
//
//	opsapi/            the contract: one small interface per tool, error kinds (stdlib only)
//	tools/             pi-exact tool semantics, written once over opsapi
//	backends/local     a confined directory and local processes
//	backends/shared/globwalk  fd-style glob with .gitignore, shared by backends
//	backends/shared/execpump  the exec output pump (relay, drain, kill), shared by backends
//	backends/shared/execconf  the killGrace/drainIdle/maxDrain/shell/rgPath config block
//	backends/backendtest  the one conformance suite every backend joins
//	backends/backendtest/overhttp  the same suite through the broker and the client
//	killtree/          process-group killing with escalation
//	cgroups/           Linux cgroups: limits, placement before exec, kill, OOM count
//	workspaces/        the workspace service: registry, quotas, admission, calls (no HTTP)
//	broker/            the HTTP layer (chi) over the workspace service
//	wire/              what travels over HTTP: bodies, stream lines, problem, error codes (stdlib + opsapi)
//	client/            a Go client implementing opsapi over HTTP
//	cli/, cmd/broker   the command-line interface, kept thin
//	internal/testutil  skip-locally, fail-in-CI helpers
//
// Dependencies point inward: everything imports opsapi, opsapi imports
// only the standard library, and no backend imports another.
package wsbroker
