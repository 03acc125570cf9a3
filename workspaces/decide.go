package workspaces

import (
	"context"
	"fmt"

	"github.com/wsbroker/wsbroker/policy"
)

// admit is the one decision every call into a workspace passes before it
// runs, tool call or raw operation, HTTP or MCP: the tenant's policy,
// through the workspace's Guard, and the tenant's disk quota for a call
// that writes or runs a command. A denial is told to the Notes in ctx
// (the policy's rule, or "quota") and returned as ErrDenied; the decision
// says what timeout a command runs with. The returned context carries the
// admission to the Guard's operations.
func (s *Service) admit(ctx context.Context, w *Workspace, c policy.Call) (context.Context, policy.Decision, error) {
	if why := w.gone(); why != "" {
		return ctx, policy.Decision{}, goneError{id: w.id, why: why}
	}
	ctx, d, err := w.guard.Admit(ctx, c)
	if err != nil {
		return ctx, d, err
	}
	if len(c.Write) == 0 && !c.HasCommand && c.Tool != BashTool {
		return ctx, d, nil
	}
	if err := s.overDisk(ctx, w); err != nil {
		notesFrom(ctx).Deny("quota", err.Error())
		return ctx, policy.Decision{Rule: "quota", Reason: err.Error()}, err
	}
	return ctx, d, nil
}

// goneError is the error of a call into a workspace whose sandbox vanished
// behind the broker's back: ErrNotFound, saying why.
type goneError struct{ id, why string }

func (e goneError) Error() string {
	return fmt.Sprintf("workspace %s is gone (%s); it can only be deleted", e.id, e.why)
}

func (e goneError) Unwrap() error { return ErrNotFound }

// unsupported is the error for an operation the workspace does not serve.
func unsupported(w *Workspace, op string) error {
	return fmt.Errorf("workspace %s (%s) does not serve %s: %w", w.id, w.backend, op, ErrNotFound)
}
