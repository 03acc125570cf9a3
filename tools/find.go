package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

// findIgnore is what pi always excludes from find.
var findIgnore = []string{"**/node_modules/**", "**/.git/**"}

type findTool struct {
	ops opsapi.FindOperations
	env *toolEnv
}

func newFindTool(ops opsapi.FindOperations, env *toolEnv) Tool {
	return &findTool{ops: ops, env: env}
}

func (t *findTool) Definition() Definition { return definitionOf("find") }

type findArgs struct {
	Pattern string   `json:"pattern"`
	Path    string   `json:"path"`
	Limit   *float64 `json:"limit"`
}

type findDetails struct {
	Truncation         *TruncationResult `json:"truncation,omitempty"`
	ResultLimitReached int               `json:"resultLimitReached,omitempty"`
}

// Execute runs the backend's glob (fd semantics) and formats as pi's fd
// branch does, including its limit notice with the "Use limit=" hint.
func (t *findTool) Execute(ctx context.Context, raw json.RawMessage, _ UpdateFunc) (Result, error) {
	var args findArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return Result{}, err
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	p := args.Path
	if p == "" {
		p = "."
	}
	searchPath := t.env.resolve(p)
	limit := effectiveLimit(args.Limit, 1000)

	if _, err := t.ops.Stat(ctx, searchPath); err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		if pathMissing(err) {
			return Result{}, toolErrorf("Path not found: %s", searchPath)
		}
		return Result{}, err
	}
	res, err := t.ops.Glob(ctx, opsapi.GlobRequest{
		Pattern: strings.TrimPrefix(args.Pattern, "./"),
		Dir:     searchPath,
		Ignore:  findIgnore,
		Limit:   limit,
	})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		return Result{}, fmt.Errorf("%s", engineMessage(err))
	}
	paths := res.Paths
	limitReached := res.LimitReached
	if len(paths) > limit {
		paths, limitReached = paths[:limit], true
	}
	if len(paths) == 0 {
		return Result{Content: []Content{TextContent("No files found matching pattern")}}, nil
	}

	notice := ""
	var details findDetails
	if limitReached {
		notice = fmt.Sprintf("%d results limit reached. Use limit=%d for more, or refine pattern", limit, limit*2)
		details.ResultLimitReached = limit
	}
	text, tr := listOutput(paths, notice)
	out := Result{Content: []Content{TextContent(text)}}
	details.Truncation = tr
	if limitReached || tr != nil {
		out.Details = details
	}
	return out, nil
}
