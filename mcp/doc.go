// Package mcp is the broker's Model Context Protocol server: pi's seven
// tools (read, write, edit, bash, grep, find, ls) for any agent that
// speaks MCP over streamable HTTP, built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// # Endpoints
//
// Server serves two kinds of endpoint, mounted by package broker behind
// its middleware stack (request id, logging, metrics, recovery, request
// audit, bearer authentication, tenant limits, body size limit):
//
//   - ServeWorkspace: the seven tools bound to one workspace the broker
//     already resolved for the caller's tenant (/v1/workspaces/{id}/mcp).
//   - ServeSessions: one workspace per MCP session, created on the first
//     tool call from the request's query (a backend and its options, or a
//     profile the workspace service resolves, the broker's, which POST
//     /v1/workspaces takes too), kept or deleted when the session ends; plus the
//     workspace_* tools to list, create, select and delete workspaces
//     (/v1/mcp).
//
// # One decision point
//
// Every tool call goes through workspaces.Service.RunTool: the tenant's
// policy, quotas, redaction and the audit record are the HTTP tool
// route's, and a denied call is an isError result with pi's text. The
// tools listed are Service.Tools(tenant): a tool the policy denies is not
// offered. This package imports no backend and no policy.
//
// # Sessions
//
// Sessions are the SDK's (Mcp-Session-Id), each bound to the tenant and
// endpoint that opened it; a session idle for Config.IdleTimeout is
// closed, and a tenant holds at most Config.MaxSessionsPerTenant (an
// initialize past it is 429). A call is cancelled by
// notifications/cancelled, by the drop of the HTTP request carrying it,
// and by its session's end (DELETE, idle expiry); bash's process tree is
// then killed, as when an HTTP stream drops.
//
// A session id is answered only to the tenant and endpoint that opened
// it: another's is replaced by an unknown one before the SDK sees it, so
// it gets the SDK's own 404, and the request is audited as a denial.
//
// # Limits
//
// The tenant's rate and concurrency limits (workspaces.Service.Enter)
// apply per HTTP request, in the broker's middleware: a POST carrying a
// tools/call holds a call slot while it runs, as the HTTP tool route's
// request does; a session's GET stream counts against the rate only.
// Each tools/call then goes through the carrier of the POST that brought
// it (limitCalls): a JSON-RPC batch's calls past the first are each
// charged against the rate (Service.ChargeCall; over it, an isError
// result, audited), and run only in the batch's call slots (its
// request's and those Service.EnterBatch finds free), as the HTTP batch
// route's calls do. A batch longer than Config.MaxBatchMessages, or
// reusing a request id, is refused whole with a JSON-RPC error; a call
// arriving after its POST ended does not run.
//
// # Results
//
// A tool result's text and image blocks become MCP TextContent and
// ImageContent, IsError is carried over, and the structured details go in
// the result's _meta under DetailsMetaKey. bash reports its output's tail
// as progress notifications when the client sent a progress token.
package mcp
