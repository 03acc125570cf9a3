package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tools"
)

// toolArgs are the fields of a tool call the policy and the audit record
// read; the rest (contents, edits) is only digested.
type toolArgs struct {
	Path     *string         `json:"path"`
	FilePath *string         `json:"file_path"` // pi's legacy name, accepted by the shim
	Command  *string         `json:"command"`
	Timeout  json.RawMessage `json:"timeout"`
}

// describeTool turns a tool call's arguments into the policy's Call. Bad
// arguments give an empty description: the tool itself refuses them.
func describeTool(name string, args json.RawMessage) policy.Call {
	c := policy.Call{Tool: name}
	var a toolArgs
	_ = json.Unmarshal(args, &a)
	p := "."
	switch {
	case a.Path != nil:
		p = *a.Path
	case a.FilePath != nil:
		p = *a.FilePath
	}
	switch name {
	case "read", "ls", "find", "grep":
		c.Read = []string{p}
	case "write":
		c.Write = []string{p}
	case "edit":
		c.Read, c.Write = []string{p}, []string{p}
	case "bash":
		if a.Command != nil {
			c.Command, c.HasCommand = *a.Command, true
		}
		if f, err := strconv.ParseFloat(string(a.Timeout), 64); err == nil && f > 0 && !math.IsInf(f, 0) {
			c.Timeout = time.Duration(f * float64(time.Second))
		}
	}
	return c
}

// writesTool names the tools a disk quota stops.
func writesTool(name string) bool { return name == "write" || name == "edit" || name == bashTool }

// runTool is every tool call's path through the broker: policy before
// (a denial is an isError result the model reads), the call through the
// workspace's Guard, redaction of every update and of the result, and
// one audit record.
func (s *Server) runTool(ctx context.Context, r *http.Request, wk *workspace, seq int, name string, args json.RawMessage, onUpdate tools.UpdateFunc) tools.Result {
	start := time.Now()
	pol := s.policyOf(wk.tenant)
	red := pol.Redactor()
	call := describeTool(name, args)
	call.Root = wk.ws.Root()
	parent := newAuditID()
	if ra := reqAuditFrom(r.Context()); ra != nil {
		parent = ra.ev.AuditID // set once, before any handler runs
	}
	ca := &reqAudit{ev: audit.Event{
		AuditID:                  fmt.Sprintf("%s/%d", parent, seq),
		RequestID:                middleware.GetReqID(r.Context()),
		Stage:                    audit.StageToolCall,
		Tenant:                   wk.tenant,
		SourceIP:                 peerIP(r),
		Workspace:                wk.id,
		Tool:                     name,
		RequestReceivedTimestamp: start.UTC(),
		Decision:                 "allow",
		Args: &audit.Args{
			Digest:  audit.Digest([]byte(name), args),
			Command: audit.Truncate(red.String(call.Command), audit.MaxCommand),
		},
	}}
	if len(call.Read) > 0 {
		ca.ev.Args.Path = call.Read[0]
	} else if len(call.Write) > 0 {
		ca.ev.Args.Path = call.Write[0]
	}
	var res tools.Result
	d := pol.Decide(call)
	var quotaErr error
	if d.Allowed && writesTool(name) {
		quotaErr = s.overDisk(wk.tenant)
	}
	switch {
	case !d.Allowed:
		ca.ev.Decision, ca.ev.Rule, ca.ev.Reason = "deny", d.Rule, d.Reason
		res = tools.ErrorResult(d.Message())
	case quotaErr != nil:
		ca.ev.Decision, ca.ev.Rule, ca.ev.Reason = "deny", "quota", quotaErr.Error()
		res = tools.ErrorResult("Blocked by quota: " + quotaErr.Error())
	default:
		var up tools.UpdateFunc
		if onUpdate != nil {
			up = func(u tools.Result) { onUpdate(redactResult(red, u)) }
		}
		// The Guard's own denials (a link into a denied path) land in
		// this call's record.
		res = redactResult(red, wk.toolbox.Call(context.WithValue(ctx, auditKey, ca), name, args, up))
	}
	out, _ := json.Marshal(res)
	isErr := res.IsError
	now := time.Now()
	ca.mu.Lock()
	ev := ca.ev
	ca.mu.Unlock()
	ev.Result = &audit.Result{IsError: &isErr, BytesIn: int64(len(args)), BytesOut: int64(len(out))}
	ev.StageTimestamp, ev.DurationNs = now.UTC(), int64(now.Sub(start))
	s.record(ev)
	return res
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
