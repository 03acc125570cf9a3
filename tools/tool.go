package tools

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/wsbroker/wsbroker/wire"
)

// Content is one block of a tool result: text, or an image as base64. It
// is the wire type itself, so what a tool returns is what the broker
// sends and the client decodes, with no copy between them.
type Content = wire.Content

// TextContent returns a text block.
func TextContent(s string) Content { return Content{Type: "text", Text: s} }

// Result is what a tool returns to the model, shaped as pi's
// AgentToolResult (wire.ToolResult). A failed tool is a Result with
// IsError set and the error's message as its only text; it is never a Go
// error, because the model must see it.
type Result = wire.ToolResult

// ErrorResult is the result pi's agent loop builds from a thrown error.
func ErrorResult(msg string) Result {
	return Result{Content: []Content{TextContent(msg)}, IsError: true}
}

// UpdateFunc receives partial results while a tool runs (bash streams its
// output tail this way). It is called serially and never after Execute
// returns.
type UpdateFunc = func(Result)

// Definition is the declaration a host hands its model
// (wire.ToolDefinition).
type Definition = wire.ToolDefinition

// Tool is one of the seven tools, written once over opsapi.
type Tool interface {
	Definition() Definition
	// Execute runs the tool on arguments that already passed the
	// compatibility shim and schema validation. A returned error becomes an
	// isError result whose text is exactly err.Error(), as pi does with a
	// thrown Error, so tools return errors carrying pi's exact strings.
	Execute(ctx context.Context, args json.RawMessage, onUpdate UpdateFunc) (Result, error)
}

// Preparer is implemented by tools whose arguments pass a compatibility
// shim before validation (pi's prepareArguments; edit's legacy shapes).
type Preparer interface {
	PrepareArguments(args any) any
}

// Options configure a Toolbox.
type Options struct {
	// Logger receives debug records; nil discards them.
	Logger *slog.Logger
	// Cwd is the directory relative paths resolve against; empty means the
	// workspace root.
	Cwd string
	// Env is passed to every bash command (KEY=VALUE); the host's own
	// environment is never forwarded.
	Env []string
	// EnvFunc, when set, is asked at each bash command for pairs that
	// come before Env's (a workspace's environment, which may change).
	EnvFunc func() []string
	// OutputDir, when set, keeps bash's full output of a truncated command
	// inside the workspace, in that directory (relative to the root), where
	// ls, find, grep and bash see it too. Empty (the default) keeps it out
	// of the workspace's tree, on the broker's host under SpillDir's name,
	// where only the read tool reaches it.
	OutputDir string
	// SpillBase is the host directory in which the toolbox makes its own
	// directory for full-output files; empty is the OS's temp dir. Close
	// removes them.
	SpillBase string
	// MaxSpillBytes bounds those files, all together; zero is
	// DefaultMaxSpillBytes.
	MaxSpillBytes int64
	// SpillBudget, when set, bounds those files together with those of
	// every toolbox given the same budget (a broker's workspaces).
	SpillBudget *SpillBudget
}

// commandEnv is a bash command's environment: EnvFunc's pairs, then Env.
func (o Options) commandEnv() []string {
	if o.EnvFunc == nil {
		return o.Env
	}
	return append(o.EnvFunc(), o.Env...)
}
