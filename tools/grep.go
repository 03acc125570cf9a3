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
	Hidden            int               `json:"hidden,omitempty"` // matches the policy left out
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
	res, err := t.search(ctx, opsapi.SearchRequest{
		Pattern:    args.Pattern,
		Path:       searchPath,
		Glob:       strings.TrimPrefix(args.Glob, "./"),
		IgnoreCase: args.IgnoreCase,
		Literal:    args.Literal,
		Context:    contextLines,
		Limit:      limit,
	})
	if err != nil {
		return Result{}, err
	}
	lines := formatGrepLines(res.Lines, limit, redaction(ctx))
	if lines.matches == 0 {
		var notices []string
		if res.Hidden > 0 {
			notices = append(notices, hiddenNotice(res.Hidden, "match", "matches"))
		}
		return emptyResult("No matches found", notices, grepDetails{Hidden: res.Hidden}), nil
	}
	return grepResult(lines, limit, res.LimitReached || lines.limitReached, res.Hidden), nil
}

// search checks that the path exists (pi's "Path not found") and runs
// the search where the files are.
func (t *grepTool) search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	if _, err := t.ops.Stat(ctx, req.Path); err != nil {
		if ctx.Err() != nil {
			return opsapi.SearchResult{}, errAborted
		}
		if pathMissing(err) {
			return opsapi.SearchResult{}, toolErrorf("Path not found: %s", req.Path)
		}
		return opsapi.SearchResult{}, err
	}
	res, err := t.ops.Search(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return opsapi.SearchResult{}, errAborted
		}
		return opsapi.SearchResult{}, fmt.Errorf("%s", engineMessage(err))
	}
	return res, nil
}

// grepLines are the search's lines as pi prints them.
type grepLines struct {
	out            []string
	matches        int
	linesTruncated bool // a line was cut to GrepMaxLineLength
	limitReached   bool // the backend sent more matches than limit
}

// formatGrepLines prints matches as "path:line: text" and context as
// "path-line- text", each redacted by redact (when not nil) and then cut
// to GrepMaxLineLength, stopping at limit matches for a backend that
// ignored Limit.
func formatGrepLines(lines []opsapi.SearchLine, limit int, redact func(string) string) grepLines {
	var g grepLines
	for _, l := range lines {
		if l.Match {
			if g.matches >= limit {
				g.limitReached = true
				break
			}
			g.matches++
		}
		text := strings.ReplaceAll(l.Text, "\r\n", "\n")
		text = strings.ReplaceAll(text, "\r", "")
		text = strings.TrimSuffix(text, "\n")
		if redact != nil {
			text = redact(text)
		}
		text, cut := TruncateLine(text, GrepMaxLineLength)
		g.linesTruncated = g.linesTruncated || cut
		if l.Match {
			g.out = append(g.out, fmt.Sprintf("%s:%d: %s", l.Path, l.Line, text))
		} else {
			g.out = append(g.out, fmt.Sprintf("%s-%d- %s", l.Path, l.Line, text))
		}
	}
	return g
}

// grepResult truncates the printed lines to pi's byte limit and adds
// its notices (match limit, byte limit, cut lines, matches the policy
// hid) with their details.
func grepResult(lines grepLines, limit int, limitReached bool, hidden int) Result {
	tr := TruncateHead(strings.Join(lines.out, "\n"), TruncationOptions{MaxLines: maxSafeInteger})
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
	if lines.linesTruncated {
		notices = append(notices, fmt.Sprintf("Some lines truncated to %d chars. Use read tool to see full lines", GrepMaxLineLength))
		details.LinesTruncated = true
	}
	if hidden > 0 {
		notices = append(notices, hiddenNotice(hidden, "match", "matches"))
		details.Hidden = hidden
	}
	result := Result{}
	if len(notices) > 0 {
		output += "\n\n[" + strings.Join(notices, ". ") + "]"
		result.Details = details
	}
	result.Content = []Content{TextContent(output)}
	return result
}
