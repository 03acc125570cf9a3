package tools

import (
	"context"
	"encoding/json"
	"path"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

type writeTool struct {
	ops opsapi.WriteOperations
	env *toolEnv
}

func newWriteTool(ops opsapi.WriteOperations, env *toolEnv) Tool {
	return &writeTool{ops: ops, env: env}
}

func (t *writeTool) Definition() Definition { return definitionOf("write") }

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Execute creates the parent directories and replaces the file, inside the
// file's mutation queue, and answers pi's newest text
// "Successfully wrote to <path>" with the path as the model gave it.
func (t *writeTool) Execute(ctx context.Context, raw json.RawMessage, _ UpdateFunc) (Result, error) {
	var args writeArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return Result{}, err
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	abs := t.env.resolve(args.Path)
	err := t.env.lockFile(ctx, abs, func() error {
		if err := checkAbort(ctx); err != nil {
			return err
		}
		dir := path.Dir(abs)
		if err := t.ops.Mkdir(ctx, dir); err != nil {
			return abortOr(ctx, nodeErr(err, "mkdir", dir))
		}
		if err := checkAbort(ctx); err != nil {
			return err
		}
		if err := t.ops.WriteFile(ctx, abs, strings.NewReader(args.Content)); err != nil {
			return abortOr(ctx, nodeErr(err, "open", abs))
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	t.env.logger.Debug("wrote file", "path", abs, "bytes", len(args.Content))
	return Result{Content: []Content{TextContent("Successfully wrote to " + args.Path)}}, nil
}

// abortOr returns errAborted when ctx has ended (the backend's error is then
// a consequence of the abort), else err.
func abortOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errAborted
	}
	return err
}
