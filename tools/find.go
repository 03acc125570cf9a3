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
	Hidden             int               `json:"hidden,omitempty"` // matches the policy left out
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
	var notices []string
	var details findDetails
	if limitReached {
		notices = append(notices, fmt.Sprintf("%d results limit reached. Use limit=%d for more, or refine pattern", limit, limit*2))
		details.ResultLimitReached = limit
	}
	if res.Hidden > 0 {
		notices = append(notices, hiddenNotice(res.Hidden, "path", "paths"))
		details.Hidden = res.Hidden
	}
	if len(paths) == 0 {
		return emptyResult("No files found matching pattern", notices, details), nil
	}
	text, tr := listOutput(paths, notices...)
	out := Result{Content: []Content{TextContent(text)}}
	details.Truncation = tr
	if limitReached || tr != nil || res.Hidden > 0 {
		out.Details = details
	}
	return out, nil
}
