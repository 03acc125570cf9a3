// Package policy is the broker's beforeToolCall and afterToolCall: a pure
// decision over a described call (Decide), the redaction applied to what
// leaves the broker (Redactor, StreamRedactor), and a workspace wrapper
// (Guard) that asks the decision before every operation a backend runs.
//
// Decide does no I/O: the caller describes the call (tool, paths already
// resolved against the workspace root, command, timeout, env names) and
// gets an Allowed flag and a reason. Path rules match the names a call
// asks for, as resolved lexically; command rules are advisory (bash can
// always reach what the sandbox lets it reach, so the boundary is the
// sandbox, not the pattern).
package policy
