package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"

	"github.com/wsbroker/wsbroker/opsapi"
)

// toolError is an error whose text is exactly what pi shows the model.
// pi's texts are capitalized sentences, unlike Go error strings, so they
// are built with toolErrorf rather than errors.New or fmt.Errorf.
type toolError string

func (e toolError) Error() string { return string(e) }

// toolErrorf formats one of pi's error texts.
func toolErrorf(format string, a ...any) error { return toolError(fmt.Sprintf(format, a...)) }

// errAborted is pi's text for every tool interrupted by its abort signal.
var errAborted error = toolError("Operation aborted")

// checkAbort returns errAborted once ctx has ended, nil before.
func checkAbort(ctx context.Context) error {
	if ctx.Err() != nil {
		return errAborted
	}
	return nil
}

// toolEnv is what every tool of one Toolbox shares.
type toolEnv struct {
	root   string // workspace root, also what "~" expands to
	cwd    string // absolute directory relative paths resolve against
	logger *slog.Logger
	opts   Options
	queue  *MutationQueue // per-workspace write/edit serialization
	ws     opsapi.Workspace
	spill  *spillStore // bash's full output, out of the workspace's tree
}

// Toolbox holds the tools one workspace supports.
type Toolbox struct {
	env   *toolEnv
	tools map[string]Tool
	order []string
}

// New builds the tools that ws supports: each tool is registered only when
// ws implements that tool's opsapi interface.
func New(ws opsapi.Workspace, opts Options) *Toolbox {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	root := ws.Root()
	cwd := root
	if opts.Cwd != "" {
		cwd = opsapi.Resolve(root, opts.Cwd)
	}
	resolver, _ := opsapi.As[opsapi.Resolver](ws)
	env := &toolEnv{
		root:   root,
		cwd:    cwd,
		logger: logger,
		opts:   opts,
		queue:  NewMutationQueue(resolver),
		ws:     ws,
		spill:  newSpillStore(opts.SpillBase, opts.MaxSpillBytes, opts.SpillBudget),
	}
	tb := &Toolbox{env: env, tools: map[string]Tool{}}
	add := func(name string, t Tool) {
		tb.tools[name] = t
		tb.order = append(tb.order, name)
	}
	// pi's order: read, bash, edit, write, grep, find, ls.
	if ops, ok := opsapi.As[opsapi.ReadOperations](ws); ok {
		add("read", newReadTool(ops, env))
	}
	if ops, ok := opsapi.As[opsapi.BashOperations](ws); ok {
		add("bash", newBashTool(ops, env))
	}
	if ops, ok := opsapi.As[opsapi.EditOperations](ws); ok {
		add("edit", newEditTool(ops, env))
	}
	if ops, ok := opsapi.As[opsapi.WriteOperations](ws); ok {
		add("write", newWriteTool(ops, env))
	}
	if ops, ok := opsapi.As[opsapi.GrepOperations](ws); ok {
		add("grep", newGrepTool(ops, env))
	}
	if ops, ok := opsapi.As[opsapi.FindOperations](ws); ok {
		add("find", newFindTool(ops, env))
	}
	if ops, ok := opsapi.As[opsapi.LsOperations](ws); ok {
		add("ls", newLsTool(ops, env))
	}
	return tb
}

// Close removes the full-output files bash kept on the broker's host;
// a later truncated command saves none. Call it when the workspace goes.
func (tb *Toolbox) Close() error { return tb.env.spill.close() }

// SpillBytes is what the workspace's full-output files hold on the
// broker's host now (at most Options.MaxSpillBytes).
func (tb *Toolbox) SpillBytes() int64 { return tb.env.spill.size() }

// Tool returns the named tool when the workspace supports it.
func (tb *Toolbox) Tool(name string) (Tool, bool) {
	t, ok := tb.tools[name]
	return t, ok
}

// Definitions declares the tools this workspace supports, in pi's order.
func (tb *Toolbox) Definitions() []Definition {
	defs := make([]Definition, 0, len(tb.order))
	for _, name := range tb.order {
		defs = append(defs, tb.tools[name].Definition())
	}
	return defs
}

// Call runs one tool call as pi's agent loop does: an unknown tool, invalid
// arguments, a returned error and even a panic all become isError results,
// never Go errors.
func (tb *Toolbox) Call(ctx context.Context, name string, args json.RawMessage, onUpdate UpdateFunc) Result {
	c, res, ok := tb.Prepare(name, args)
	if !ok {
		return res
	}
	return c.Run(ctx, onUpdate)
}

// Prepared is a tool call whose arguments passed the compatibility shim
// and schema validation: what it touches is known (Access) before it runs.
type Prepared struct {
	tb   *Toolbox
	name string
	tool Tool
	args json.RawMessage // validated
}

// Prepare finds the tool and validates args as pi's agent loop does. When
// it cannot (an unknown tool, invalid arguments, a panic in the shim) it
// returns the isError result pi shows and false.
func (tb *Toolbox) Prepare(name string, args json.RawMessage) (c *Prepared, res Result, ok bool) {
	t, found := tb.tools[name]
	if !found {
		return nil, ErrorResult(fmt.Sprintf("Tool %s not found", name)), false
	}
	log := tb.env.logger.With("tool", name)
	defer func() {
		if r := recover(); r != nil {
			log.Error("tool panicked", "panic", r, "stack", string(debug.Stack()))
			c, res, ok = nil, ErrorResult(fmt.Sprintf("Tool %s failed: internal error: %v", name, r)), false
		}
	}()
	// A large call (a write carrying a whole file) must not be copied more
	// than needed: the value is decoded once, the key order (which only
	// an error message prints) is read only on failure, and the arguments
	// travel on as sent when validation changed nothing.
	decoded := decodeArgValue(args)
	value := decoded
	if p, isPreparer := t.(Preparer); isPreparer { // repairs return a new value; valid input comes back as it was
		value = p.PrepareArguments(value)
	}
	params := t.Definition().Parameters
	validated, err := validateArguments(name, params, value, nil)
	if err != nil {
		_, order := decodeArgs(args)
		_, err = validateArguments(name, params, value, order)
		log.Debug("invalid arguments", "err", err)
		return nil, ErrorResult(err.Error()), false
	}
	raw := args
	if !reflect.DeepEqual(validated, decoded) || !isObject(args) {
		if raw, err = json.Marshal(validated); err != nil { // cannot happen for values decoded from JSON
			return nil, ErrorResult(err.Error()), false
		}
	}
	return &Prepared{tb: tb, name: name, tool: t, args: raw}, Result{}, true
}

// isObject reports whether raw is a JSON object (after blanks): empty
// or malformed arguments decode as {} and must be re-encoded.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// Access is what the call reads, writes or runs.
func (c *Prepared) Access() Access {
	if d, ok := c.tool.(Describer); ok {
		return d.Access(c.args)
	}
	return Access{}
}

// Run executes the call; a returned error or a panic becomes an isError
// result.
func (c *Prepared) Run(ctx context.Context, onUpdate UpdateFunc) (res Result) {
	log := c.tb.env.logger.With("tool", c.name)
	defer func() {
		if r := recover(); r != nil {
			log.Error("tool panicked", "panic", r, "stack", string(debug.Stack()))
			res = ErrorResult(fmt.Sprintf("Tool %s failed: internal error: %v", c.name, r))
		}
	}()
	up := guardUpdates(onUpdate)
	res, err := c.tool.Execute(ctx, c.args, up.send)
	up.close()
	if err != nil {
		log.Debug("tool failed", "err", err)
		return ErrorResult(err.Error())
	}
	if res.Content == nil {
		res.Content = []Content{}
	}
	return res
}

// updateGuard enforces UpdateFunc's contract for the host even when a tool
// leaks a goroutine: updates are serial and none arrives after Execute.
type updateGuard struct {
	mu   sync.Mutex
	fn   UpdateFunc
	done bool
}

func guardUpdates(fn UpdateFunc) *updateGuard { return &updateGuard{fn: fn} }

func (g *updateGuard) send(r Result) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done || g.fn == nil {
		return
	}
	g.fn(r)
}

func (g *updateGuard) close() {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
}

// Names lists the seven tools in pi's order.
func Names() []string {
	return []string{"read", "bash", "edit", "write", "grep", "find", "ls"}
}

// Definitions declares all seven tools, whatever a workspace supports.
func Definitions() []Definition {
	defs := make([]Definition, 0, 7)
	for _, n := range Names() {
		defs = append(defs, definitionOf(n))
	}
	return defs
}
