package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/workspaces"
)

// Every tools/call reaches its handler through the carrier of the POST
// that brought it: the POST's own call slot and rate token (taken by the
// broker's middleware) cover its first call; each other call of a
// JSON-RPC batch is charged against the tenant's rate on its own and
// runs only in one of the batch's call slots (the POST's and those free
// when it came, as POST /v1/workspaces/{id}/batch), so a batch never
// runs more calls at once than the tenant's concurrentCalls, nor more
// calls than its rate allows.

// errCarrierEnded is a call that reached the server after the HTTP
// request carrying it was answered or dropped: it does not run.
var errCarrierEnded = errors.New("the HTTP request carrying this call has ended, so the call does not run")

// bodyShape is what the Server reads of a POST's JSON-RPC body before
// the SDK does.
type bodyShape struct {
	batch      bool
	messages   int
	toolCalls  int
	initialize bool
	// dupID is a request id a batch carries twice, if any.
	dupID string
}

// shapeOf reads what it needs of r's body (left to be read again) for
// its shape: one message of a session only up to its first byte (it may
// be a tools/call; reading its method is the SDK's work), anything else
// whole. A body that is not JSON-RPC is the SDK's to refuse.
func shapeOf(r *http.Request) bodyShape {
	br := bufio.NewReader(r.Body)
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	if batch, known := startsBatch(br); known && !batch && r.Header.Get("Mcp-Session-Id") != "" {
		return bodyShape{messages: 1, toolCalls: 1}
	}
	body, err := io.ReadAll(br)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return bodyShape{} // the SDK reads the same error
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []message
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	batch := len(trimmed) > 0 && trimmed[0] == '['
	if batch {
		_ = json.Unmarshal(body, &msgs)
	} else {
		var one message
		if json.Unmarshal(body, &one) == nil {
			msgs = []message{one}
		}
	}
	shape := bodyShape{batch: batch, messages: len(msgs)}
	ids := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		switch m.Method {
		case "initialize":
			shape.initialize = true
		case "tools/call":
			shape.toolCalls++
		}
		if id := string(bytes.TrimSpace(m.ID)); id != "" && id != "null" {
			if ids[id] && shape.dupID == "" {
				shape.dupID = id
			}
			ids[id] = true
		}
	}
	return shape
}

// startsBatch reports whether the JSON text in br opens an array (a
// JSON-RPC batch), reading nothing; known is false when leading white
// space fills br's buffer.
func startsBatch(br *bufio.Reader) (batch, known bool) {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if errors.Is(err, bufio.ErrBufferFull) {
			return false, false
		}
		if len(b) < n {
			return false, true // an empty body: the SDK refuses it
		}
		switch b[n-1] {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return true, true
		}
		return false, true
	}
}

// refuseBatch answers a JSON-RPC batch the server does not take: 400
// with a JSON-RPC error (Invalid Request) saying why.
func refuseBatch(w http.ResponseWriter, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": -32600, "message": reason},
	})
}

// batchRefusal is why the server does not take a batch of that shape, or
// "" when it does.
func (s *Server) batchRefusal(shape bodyShape) string {
	switch {
	case !shape.batch:
		return ""
	case shape.messages > s.cfg.MaxBatchMessages:
		return fmt.Sprintf("a JSON-RPC batch of %d messages; at most %d are allowed in one request", shape.messages, s.cfg.MaxBatchMessages)
	case shape.dupID != "":
		return fmt.Sprintf("a JSON-RPC batch carries request id %s twice; each request of a batch needs its own id", shape.dupID)
	}
	return ""
}

// carrier is what the tools/calls of one POST share: the request's life,
// its call slots and the count of its calls.
type carrier struct {
	svc    *workspaces.Service
	tenant *tenant.Tenant
	notes  workspaces.Notes
	ctx    context.Context
	stop   context.CancelFunc
	slots  chan struct{}
	leave  func() // gives back the slots taken beside the POST's own

	mu      sync.Mutex
	arrived int
	running int
	ended   bool
	idle    chan struct{} // closed once ended with nothing running
}

// newCarrier makes the carrier of a POST carrying toolCalls calls for
// t, ended when r's context is: the POST's own slot, plus as many free
// ones as its other calls can use.
func (s *Server) newCarrier(r *http.Request, t *tenant.Tenant, notes workspaces.Notes, toolCalls int) *carrier {
	extra, leave := s.svc.EnterBatch(t, toolCalls-1)
	ctx, stop := context.WithCancel(r.Context())
	if notes == nil {
		notes = noNotes{}
	}
	return &carrier{svc: s.svc, tenant: t, notes: notes, ctx: ctx, stop: stop,
		slots: make(chan struct{}, 1+extra), leave: leave, idle: make(chan struct{})}
}

// end ends the carrier: calls still to come are refused, running ones are
// cancelled and waited for, then the slots go back. The POST's own slot
// is released only after this returns, so no call of it outlives it.
func (c *carrier) end() {
	c.stop()
	c.mu.Lock()
	c.ended = true
	if c.running == 0 {
		close(c.idle)
	}
	c.mu.Unlock()
	<-c.idle
	c.leave()
}

// admit counts a call in: its number in the POST (for its audit id) and,
// past the first, its charge against the tenant's rate (a refusal when
// over it). An admitted call, refused or not, calls done when it returns;
// a call after the end is errCarrierEnded.
func (c *carrier) admit() (seq int, refused *workspaces.LimitError, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return 0, nil, errCarrierEnded
	}
	c.arrived++
	c.running++
	if c.arrived > 1 {
		var le *workspaces.LimitError
		if errors.As(c.svc.ChargeCall(c.tenant), &le) {
			return c.arrived, le, nil
		}
	}
	return c.arrived, nil, nil
}

// done counts an admitted call out.
func (c *carrier) done() {
	c.mu.Lock()
	c.running--
	if c.ended && c.running == 0 {
		close(c.idle)
	}
	c.mu.Unlock()
}

// run runs an admitted call in one of the carrier's slots, waiting for
// one while ctx lasts.
func (c *carrier) run(ctx context.Context, call func() (sdk.Result, error)) (sdk.Result, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return errorResult(fmt.Errorf("waiting for one of the tenant's call slots: %w", context.Cause(ctx))), nil
	}
	defer func() { <-c.slots }()
	return call()
}

// carriers are the POSTs being served, by their carrier key.
type carriers struct {
	mu sync.Mutex
	m  map[string]*carrier
}

func (cs *carriers) put(key string, c *carrier) {
	cs.mu.Lock()
	cs.m[key] = c
	cs.mu.Unlock()
}

func (cs *carriers) get(key string) *carrier {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.m[key]
}

func (cs *carriers) remove(key string) {
	cs.mu.Lock()
	delete(cs.m, key)
	cs.mu.Unlock()
}

// callKey carries a call's place in its POST to the tool handler.
type callKey struct{}

// callInfo is a call's number in its POST and, when the tenant's limits
// refused it, why.
type callInfo struct {
	seq     int
	refused *workspaces.LimitError
}

func callInfoOf(ctx context.Context) callInfo {
	ci, ok := ctx.Value(callKey{}).(callInfo)
	if !ok {
		return callInfo{seq: 1}
	}
	return ci
}

// limitCalls is the session's middleware that admits each tools/call
// through its carrier: cancelled with the POST carrying it and with the
// session; refused (isError, audited) past the tenant's rate; run in one
// of the POST's call slots.
func (s *Server) limitCalls(sess *session) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			var c *carrier
			if extra := req.GetExtra(); extra != nil && extra.Header != nil {
				c = s.carriers.get(extra.Header.Get(headerCarrier))
			}
			if c == nil {
				return errorResult(errCarrierEnded), nil
			}
			seq, refused, err := c.admit()
			if err != nil {
				return errorResult(err), nil
			}
			defer c.done()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(c.ctx, cancel)()
			defer context.AfterFunc(sess.ctx, cancel)()
			ctx = context.WithValue(ctx, callKey{}, callInfo{seq: seq, refused: refused})
			if refused != nil {
				if p, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok && sess.workspaceTools[p.Name] {
					return next(ctx, method, req) // the tool records its refusal
				}
				c.notes.Deny(refused.Rule, refused.Reason)
				return resultOf(tools.ErrorResult(fmt.Sprintf("Blocked by %s limit: %s. Retry after %s.",
					refused.Rule, refused.Reason, refused.RetryAfter.Round(time.Second)))), nil
			}
			return c.run(ctx, func() (sdk.Result, error) { return next(ctx, method, req) })
		}
	}
}

type noNotes struct{}

func (noNotes) Deny(string, string)           {}
func (noNotes) Workspace(string)              {}
func (noNotes) Args(string, string, []string) {}
func (noNotes) ExitCode(int)                  {}
