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
// The module reads in layers, each importing only those below it:
//
//	front-ends     cmd/broker (main only hands its arguments to cli), cli/,
//	               broker/ (HTTP, chi), mcp/ (MCP), client/ (a Go client over
//	               HTTP) and client/overhttp (the suite rerun through both)
//	service        workspaces/ (registry, owners, quotas, admission, tool
//	               calls; no HTTP) with workspaces/bgproc (background
//	               processes); tenant/, policy/ (the one decision), audit/
//	tools          tools/: pi-exact tool semantics, written once over opsapi
//	backends       backends/local (with backends/local/cgroups and
//	               backends/local/sandbox), backends/docker, backends/ssh,
//	               backends/kubernetes; backends/warmpool; backends/backendtest,
//	               the one conformance suite every backend joins
//	remote         remote/: both ends of the in-box agent's protocol, which
//	               docker, ssh and kubernetes share: remote/agent (the agent,
//	               built as cmd/wsb-agent), remote/agentclient, remote/sftpops,
//	               remote/sftpserver, remote/sftpext, remote/remoteexec,
//	               remote/agentbin
//	contract       opsapi/ (one small interface per tool), wire/ (what travels
//	               over HTTP), tarball/ (trees as tar streams over opsapi)
//	helpers        killtree/ (process-tree killing), internal/ (procstart,
//	               loopfs, execpump, execconf, globwalk, rgjson, bytesize,
//	               testutil)
//	around         e2e/ (README, hostile commands), cmd/bench (make bench),
//	               images/, integrations/ (pi, MCP), scripts/, docs/
//
// Dependencies point inward: opsapi imports only the standard library, wire
// only it and the standard library, nothing under remote/ imports a
// backend, no backend imports another, and broker imports no backend and
// no policy. .golangci.yml holds these rules.
package wsbroker
