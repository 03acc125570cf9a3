package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

type grepTool struct {
	ops opsapi.GrepOperations
	env *toolEnv
}

func newGrepTool(ops opsapi.GrepOperations, env *toolEnv) Tool {
	return &grepTool{ops: ops, env: env}
}

func (t *grepTool) Definition() Definition { return definitionOf("grep") }

type grepArgs struct {
	Pattern    string   `json:"pattern"`
	Path       string   `json:"path"`
	Glob       string   `json:"glob"`
	IgnoreCase bool     `json:"ignoreCase"`
	Literal    bool     `json:"literal"`
	Context    *float64 `json:"context"`
	Limit      *float64 `json:"limit"`
}

type grepDetails struct {
	Truncation        *TruncationResult `json:"truncation,omitempty"`
	MatchLimitReached int               `json:"matchLimitReached,omitempty"`
	LinesTruncated    bool              `json:"linesTruncated,omitempty"`
}

// Execute runs the search where the files are (opsapi.GrepOperations.Search,
// ripgrep semantics) and formats the lines as pi 1.6.0 does with context
// taken from ripgrep.
func (t *grepTool) Execute(ctx context.Context, raw json.RawMessage, _ UpdateFunc) (Result, error) {
	var args grepArgs
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
	limit := effectiveLimit(args.Limit, 100)
	contextLines := 0
	if args.Context != nil && *args.Context > 0 {
		contextLines = int(math.Min(math.Floor(*args.Context), 1<<20))
	}

	if _, err := t.ops.Stat(ctx, searchPath); err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		if pathMissing(err) {
			return Result{}, toolErrorf("Path not found: %s", searchPath)
		}
		return Result{}, err
	}
	res, err := t.ops.Search(ctx, opsapi.SearchRequest{
		Pattern:    args.Pattern,
		Path:       searchPath,
		Glob:       strings.TrimPrefix(args.Glob, "./"),
		IgnoreCase: args.IgnoreCase,
		Literal:    args.Literal,
		Context:    contextLines,
		Limit:      limit,
	})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		return Result{}, fmt.Errorf("%s", engineMessage(err))
	}

	var out []string
	matches, linesTruncated := 0, false
	limitReached := res.LimitReached
	for _, l := range res.Lines {
		if l.Match {
			if matches >= limit { // a backend that ignored Limit
				limitReached = true
				break
			}
			matches++
		}
		text := strings.ReplaceAll(l.Text, "\r\n", "\n")
		text = strings.ReplaceAll(text, "\r", "")
		text = strings.TrimSuffix(text, "\n")
		text, cut := TruncateLine(text, GrepMaxLineLength)
		linesTruncated = linesTruncated || cut
		if l.Match {
			out = append(out, fmt.Sprintf("%s:%d: %s", l.Path, l.Line, text))
		} else {
			out = append(out, fmt.Sprintf("%s-%d- %s", l.Path, l.Line, text))
		}
	}
	if matches == 0 {
		return Result{Content: []Content{TextContent("No matches found")}}, nil
	}

	tr := TruncateHead(strings.Join(out, "\n"), TruncationOptions{MaxLines: maxSafeInteger})
	output := tr.Content
	var details grepDetails
	var notices []string
	if limitReached {
		notices = append(notices, fmt.Sprintf("%d matches limit reached. Use limit=%d for more, or refine pattern", limit, limit*2))
		details.MatchLimitReached = limit
	}
	if tr.Truncated {
		notices = append(notices, FormatSize(DefaultMaxBytes)+" limit reached")
		details.Truncation = &tr
	}
	if linesTruncated {
		notices = append(notices, fmt.Sprintf("Some lines truncated to %d chars. Use read tool to see full lines", GrepMaxLineLength))
		details.LinesTruncated = true
	}
	result := Result{}
	if len(notices) > 0 {
		output += "\n\n[" + strings.Join(notices, ". ") + "]"
		result.Details = details
	}
	result.Content = []Content{TextContent(output)}
	return result, nil
}
