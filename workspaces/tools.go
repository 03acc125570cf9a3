package workspaces

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tools"
)

// BashTool is the tool whose calls are commands: RunTool registers each
// as one (startCommand), so Delete and Shutdown cancel it and wait for it.
const BashTool = "bash"

// RunTool is every tool call's path: the tool's shim and validation, the
// one admission (policy and quota; a denial is an isError result the
// model reads), the call through the workspace's Guard, redaction of
// every update and of the result, and one audit record, numbered seq
// under the request's audit id. A bash call runs as a command of w
// (startCommand); the error is only that it could not start as one
// (ErrUnavailable: the service is shutting down), and then nothing ran.
func (s *Service) RunTool(ctx context.Context, w *Workspace, seq int, name string, args json.RawMessage, onUpdate tools.UpdateFunc) (tools.Result, error) {
	if name == BashTool {
		cctx, end, err := s.startCommand(ctx, w)
		if err != nil {
			return tools.Result{}, fmt.Errorf("starting bash in workspace %s: %w", w.id, err)
		}
		defer end()
		ctx = cctx
	}
	return s.runTool(ctx, w, seq, name, args, onUpdate, nil), nil
}

// ToolCall is one call of a batch (RunBatch); Refused, when set, is the
// tenant's limit that refused it (see RefuseTool).
type ToolCall struct {
	Name    string
	Args    json.RawMessage
	Refused *LimitError
}

// RunBatch runs the calls of one batch, numbered from 1 in their order,
// as RunTool runs each (a refused one as RefuseTool does). A batch with a
// bash call is one command of w: registered once before any call runs,
// so a batch refused while the service shuts down runs nothing (the
// error, ErrUnavailable), and Delete and Shutdown cancel all of its
// calls. schedule calls run once for each index, in the order and with
// the concurrency the front-end chose, and returns when all have run.
func (s *Service) RunBatch(ctx context.Context, w *Workspace, calls []ToolCall, schedule func(run func(i int))) ([]tools.Result, error) {
	for _, c := range calls {
		if c.Name != BashTool {
			continue
		}
		cctx, end, err := s.startCommand(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("starting a batch with bash in workspace %s: %w", w.id, err)
		}
		defer end()
		ctx = cctx
		break
	}
	results := make([]tools.Result, len(calls))
	schedule(func(i int) {
		c := calls[i]
		results[i] = s.runTool(ctx, w, i+1, c.Name, c.Args, nil, c.Refused)
	})
	return results, nil
}

// RefuseTool is a batch call refused by its tenant's limits (le): it
// does not run, gets an isError result naming the limit, and is audited
// as a denial under the limit's rule, as a 429 request would be.
func (s *Service) RefuseTool(ctx context.Context, w *Workspace, seq int, name string, args json.RawMessage, le *LimitError) tools.Result {
	return s.runTool(ctx, w, seq, name, args, nil, le)
}

func (s *Service) runTool(ctx context.Context, w *Workspace, seq int, name string, args json.RawMessage,
	onUpdate tools.UpdateFunc, refused *LimitError) tools.Result {
	start := time.Now()
	red := s.redactorOf(w)
	req := requestFrom(ctx)
	parent := req.AuditID
	if parent == "" {
		parent = NewAuditID()
	}
	rec := &callRecord{ev: audit.Event{
		AuditID:                  fmt.Sprintf("%s/%d", parent, seq),
		RequestID:                req.ID,
		Stage:                    audit.StageToolCall,
		Tenant:                   w.tenant,
		SourceIP:                 req.SourceIP,
		Workspace:                w.id,
		Tool:                     name,
		RequestReceivedTimestamp: start.UTC(),
		Decision:                 "allow",
		Args:                     &audit.Args{Digest: audit.Digest([]byte(name), args)},
	}}
	// The Guard's own denials (a link into a denied path) land in this
	// call's record.
	ctx = context.WithValue(ctx, notesKey{}, Notes(rec))
	var res tools.Result
	switch {
	case refused != nil:
		rec.Deny(refused.Rule, refused.Reason)
		res = tools.ErrorResult(fmt.Sprintf("Blocked by %s limit: %s. Retry after %s.", refused.Rule, refused.Reason,
			refused.RetryAfter.Round(time.Second)))
	case s.cfg.Audit.Ready() != nil:
		// Fail closed: a call that could not be recorded does not run.
		rec.Deny("audit", "the audit trail cannot be written")
		res = tools.ErrorResult("Refused: the broker's audit trail cannot be written, so no call runs. Try again later.")
	default:
		res = s.decideAndRun(ctx, w, red, rec, name, args, onUpdate)
	}
	out, _ := json.Marshal(res)
	isErr := res.IsError
	now := time.Now()
	rec.mu.Lock()
	ev := rec.ev
	rec.mu.Unlock()
	ev.Result = &audit.Result{IsError: &isErr, BytesIn: int64(len(args)), BytesOut: int64(len(out))}
	ev.StageTimestamp, ev.DurationNs = now.UTC(), int64(now.Sub(start))
	s.Record(ev)
	return res
}

// decideAndRun prepares the call, admits it and runs it.
func (s *Service) decideAndRun(ctx context.Context, w *Workspace, red *policy.Redactor, rec *callRecord,
	name string, args json.RawMessage, onUpdate tools.UpdateFunc) tools.Result {
	prepared, invalid, ok := w.toolbox.Prepare(name, args)
	if !ok {
		// The tool rule still comes first: a denied tool is denied
		// whatever its arguments.
		if _, d, err := w.guard.Admit(ctx, policy.Call{Tool: name}); err != nil {
			return tools.ErrorResult(d.Message())
		}
		return invalid
	}
	acc := prepared.Access()
	rec.Args(firstPath(acc), audit.Truncate(red.String(acc.Command), audit.MaxCommand), nil)
	ctx, d, err := s.admit(ctx, w, policy.Call{Tool: name, Read: acc.Read, Write: acc.Write,
		Command: acc.Command, HasCommand: acc.HasCommand, Timeout: acc.Timeout})
	switch {
	case errors.As(err, new(goneError)):
		return tools.ErrorResult(err.Error())
	case err != nil && d.Rule == "quota":
		return tools.ErrorResult("Blocked by quota: " + d.Reason)
	case err != nil:
		return tools.ErrorResult(d.Message())
	}
	if !red.Empty() {
		ctx = tools.WithRedaction(ctx, red.String)
	}
	var up tools.UpdateFunc
	if onUpdate != nil {
		up = func(u tools.Result) { onUpdate(redactResult(red, u)) }
	}
	return redactResult(red, prepared.Run(ctx, up))
}

func firstPath(a tools.Access) string {
	switch {
	case len(a.Read) > 0:
		return a.Read[0]
	case len(a.Write) > 0:
		return a.Write[0]
	}
	return ""
}

// callRecord is a tool call's audit record while it runs: the Notes of
// everything the call learns.
type callRecord struct {
	mu sync.Mutex
	ev audit.Event
}

func (r *callRecord) Deny(rule, reason string) {
	r.mu.Lock()
	r.ev.Decision, r.ev.Rule, r.ev.Reason = "deny", rule, reason
	r.mu.Unlock()
}

func (r *callRecord) Workspace(string) {}

func (r *callRecord) Args(path, command string, _ []string) {
	r.mu.Lock()
	r.ev.Args.Path, r.ev.Args.Command = path, command
	r.mu.Unlock()
}

func (r *callRecord) ExitCode(int) {}

// Record writes an audit event and counts a denial.
func (s *Service) Record(ev audit.Event) {
	if ev.Decision == "deny" {
		s.obs.Denied(ev.Rule)
	}
	// A failed write is logged by the log, and makes its Ready refuse
	// the next calls: the call itself has already run.
	_ = s.cfg.Audit.Write(ev)
}

// NewAuditID returns 128 random bits as hex: a client's X-Request-Id is
// its own to choose, an audit id is not.
func NewAuditID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// redactResult applies red to every text block and every string in the
// details, so a secret leaves neither in what the model reads nor in the
// structured part.
func redactResult(red *policy.Redactor, res tools.Result) tools.Result {
	if red.Empty() {
		return res
	}
	content := make([]tools.Content, len(res.Content))
	for i, c := range res.Content {
		c.Text = red.String(c.Text)
		content[i] = c
	}
	res.Content = content
	if res.Details != nil {
		if b, err := json.Marshal(res.Details); err == nil {
			var v any
			if json.Unmarshal(b, &v) == nil {
				res.Details = redactValue(red, v)
			}
		}
	}
	return res
}

func redactValue(red *policy.Redactor, v any) any {
	switch x := v.(type) {
	case string:
		return red.String(x)
	case []any:
		for i := range x {
			x[i] = redactValue(red, x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = redactValue(red, x[k])
		}
	}
	return v
}
