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
// Every package of the module, from the transports inward:
//
//	cmd/broker                      the one binary; main only hands its arguments to cli
//	cmd/wsb-sftp-server             the static SFTP server injected into containers
//	cli/                            the command-line verbs: serve, ws, tool, exec, policy, audit, token
//	broker/                         the HTTP layer (chi): decode, authenticate, call the service, encode
//	wire/                           what travels over HTTP: bodies, stream lines, problem, error codes
//	client/                         a Go client implementing opsapi over HTTP, over wire
//	workspaces/                     the workspace service: registry, owners, quotas, admission, calls (no HTTP)
//	tenant/                         tenants, their tokens (hashed), quotas and policies
//	policy/                         the pure decision, redaction, and the Guard every call passes
//	audit/                          the hash-chained audit trail
//	tools/                          pi-exact tool semantics, written once over opsapi
//	opsapi/                         the contract: one small interface per tool, abilities, error kinds
//	backends/local                  a confined directory and local processes
//	backends/docker                 a hardened container per workspace
//	backends/ssh                    a directory on an SSH host or VM
//	backends/ssh/sshtest            a real sshd for tests, on loopback or in a container
//	backends/shared/execconf        the killGrace/drainIdle/maxDrain/shell/rgPath config block
//	backends/shared/execpump        the exec output pump (relay, drain, kill)
//	backends/shared/globwalk        fd-style glob with .gitignore
//	backends/shared/remoteexec      the wrapper that kills a remote command's whole tree
//	backends/shared/rgjson          ripgrep's command line, JSON and remote runner
//	backends/shared/sftpext         the SFTP extensions' names, shared by client and server
//	backends/shared/sftpops         file operations over SFTP
//	backends/shared/sftpserver      the broker's SFTP server with its extensions
//	backends/backendtest            the one conformance suite every backend joins
//	backends/backendtest/overhttp   the same suite through the broker and the client
//	killtree/                       process-group killing with escalation
//	cgroups/                        Linux cgroups: limits, placement before exec, kill, OOM count
//	e2e/, e2e/adversarial           end-to-end and hostile-command tests on every backend
//	bench/                          make bench: in-process and over HTTP, side by side
//	internal/testutil               skip-locally, fail-in-CI helpers
//
// Dependencies point inward: opsapi imports only the standard library, wire
// only it and the standard library, no backend imports another, and broker
// imports no backend and no policy. .golangci.yml holds these rules.
package wsbroker
