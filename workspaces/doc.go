// Package workspaces is the workspace service: everything the broker does
// with workspaces, apart from HTTP. The HTTP layer (package broker) and
// the MCP server call the same Service; neither decides anything itself.
//
// # Overview
//
// New builds a Service over a set of opsapi.Backend values keyed by
// registry name and adopts the workspaces that backends implementing
// opsapi.Rediscoverer still hold. The Service owns:
//
//   - the registry of live workspaces and which tenant owns each (kept in
//     an owners file so that ownership survives a restart);
//   - the broker's profiles, named workspace specs a create may name
//     instead of a backend and options (CreateSpec resolves one for every
//     front-end; Create then admits what it resolves to);
//   - admission: a create is checked against the tenant's backends,
//     images, workspace quota and the policy's network rule (Create), and
//     every call against the tenant's rate and concurrency limits (Enter,
//     whose *LimitError carries the wait);
//   - the call lifecycle: running commands are tracked so that Delete and
//     Shutdown cancel them and wait;
//   - tool calls (RunTool, and RunBatch for a batch): the policy's
//     decision, redaction of updates and results, and one audit record
//     per call; a bash call runs as a command, which Delete and
//     Shutdown cancel, so the front-ends only call RunTool;
//   - the raw operations (Open, WriteFile, Stat, Exec, ...) as methods
//     taking Go values, each decided by the same policy and redacted the
//     same way.
//
// # Policy
//
// Each workspace is wrapped in a policy.Guard, the one place a call meets
// the tenant's policy: the Service admits every tool call and raw
// operation through it (plus the tenant's disk quota), and the operations
// that reach the backend through it decide what they really touch.
// Abilities are found with opsapi.As, so the Guard hides none.
//
// # What the caller hears
//
// A denial, the workspace a request reached and a command's exit code
// belong in the caller's request record: the Service tells them to the
// Notes found in the context (WithRequest). Metrics hear through Observer.
// Errors are opsapi kinds, plus ErrNotFound (an unknown workspace, or an
// operation its backend does not serve) and *LimitError.
//
// This package imports no net/http.
package workspaces
