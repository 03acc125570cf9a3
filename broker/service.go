package broker

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/workspaces"
)

// What joins the HTTP layer to the workspace service: the request's
// context for the service, the request record as its Notes, the metrics
// as its Observer, and the service's errors in the broker's kinds.

// serviceCtx returns r's context carrying what the service needs to know
// of the request: its ids, its peer, and its audit record's Notes.
func serviceCtx(r *http.Request) context.Context {
	return workspaces.WithRequest(r.Context(), serviceRequest(r))
}

// serviceRequest names r for the service: its ids, its peer, and the
// Notes of its audit record.
func serviceRequest(r *http.Request) workspaces.Request {
	req := workspaces.Request{ID: middleware.GetReqID(r.Context()), SourceIP: peerIP(r)}
	if ra := reqAuditFrom(r.Context()); ra != nil {
		req.AuditID = ra.ev.AuditID // set once, before any handler runs
		req.Notes = ra
	}
	return req
}

// Deny marks the request's record as denied.
func (ra *reqAudit) Deny(rule, reason string) {
	ra.set(func(ev *audit.Event) { ev.Decision, ev.Rule, ev.Reason = "deny", rule, reason })
}

// Workspace records the workspace the request reached.
func (ra *reqAudit) Workspace(id string) { ra.set(func(ev *audit.Event) { ev.Workspace = id }) }

// Args records what the request's operation touched.
func (ra *reqAudit) Args(path, command string, env []string) {
	ra.set(func(ev *audit.Event) { ev.Args = &audit.Args{Path: path, Command: command, Env: env} })
}

// ExitCode records a command's exit code.
func (ra *reqAudit) ExitCode(code int) {
	ra.set(func(ev *audit.Event) { ev.Result = &audit.Result{ExitCode: &code} })
}

var _ workspaces.Notes = (*reqAudit)(nil)

// WorkspacesChanged keeps the workspaces gauge.
func (m *metrics) WorkspacesChanged(backend string, delta int) {
	m.workspaces.WithLabelValues(backend).Add(float64(delta))
}

// CommandsRunning keeps the running-commands gauge.
func (m *metrics) CommandsRunning(delta int) { m.running.Add(float64(delta)) }

// Denied counts an audited denial.
func (m *metrics) Denied(rule string) { m.denials.WithLabelValues(rule).Inc() }

var _ workspaces.Observer = (*metrics)(nil)

// fromService gives the service's own kinds the broker's, keeping the
// text: workspaces.ErrNotFound is ErrNotFound, a *workspaces.LimitError
// ErrTooManyRequests.
func fromService(err error) error {
	if errors.Is(err, workspaces.ErrNotFound) {
		return serviceErr{err, ErrNotFound}
	}
	return err
}

// serviceErr is a service error that also is one of the broker's kinds.
type serviceErr struct {
	error
	kind error
}

func (e serviceErr) Unwrap() []error { return []error{e.error, e.kind} }
