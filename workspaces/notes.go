package workspaces

import "context"

// Request is what the service knows of the request a call came in: for
// its logs and for the records it writes itself (tool calls).
type Request struct {
	// ID is the request id (X-Request-Id), for logs.
	ID string
	// AuditID is the request record's audit id; a tool call's record is
	// AuditID/seq. Empty makes a fresh one.
	AuditID string
	// SourceIP is the peer address.
	SourceIP string
	// Notes hears what the service learns for the request's record; nil
	// hears nothing.
	Notes Notes
}

// Notes is how a caller's request record hears what the service learned
// while serving it.
type Notes interface {
	// Deny records a denial: the rule kind (a policy rule, "quota",
	// "tenant", ...) and the reason.
	Deny(rule, reason string)
	// Workspace records the workspace the request reached.
	Workspace(id string)
	// Args records what the call touched: a path, a (redacted) command
	// and environment variable names.
	Args(path, command string, env []string)
	// ExitCode records a command's exit code.
	ExitCode(code int)
}

type requestKey struct{}

// WithRequest returns ctx carrying r, for every Service method called
// with it.
func WithRequest(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

func requestFrom(ctx context.Context) Request {
	r, _ := ctx.Value(requestKey{}).(Request)
	return r
}

type notesKey struct{}

// notesFrom returns the Notes calls made with ctx report to: a tool call's
// own record inside RunTool, else the request's.
func notesFrom(ctx context.Context) Notes {
	if n, ok := ctx.Value(notesKey{}).(Notes); ok {
		return n
	}
	if n := requestFrom(ctx).Notes; n != nil {
		return n
	}
	return nopNotes{}
}

type nopNotes struct{}

func (nopNotes) Deny(string, string)           {}
func (nopNotes) Workspace(string)              {}
func (nopNotes) Args(string, string, []string) {}
func (nopNotes) ExitCode(int)                  {}

// Observer hears what metrics count. Its methods must be cheap and safe
// for concurrent use.
type Observer interface {
	// WorkspacesChanged adds delta to the backend's workspace count (0
	// declares the backend).
	WorkspacesChanged(backend string, delta int)
	// CommandsRunning adds delta to the running commands.
	CommandsRunning(delta int)
	// Denied counts an audited denial by rule.
	Denied(rule string)
}

type nopObserver struct{}

func (nopObserver) WorkspacesChanged(string, int) {}
func (nopObserver) CommandsRunning(int)           {}
func (nopObserver) Denied(string)                 {}
