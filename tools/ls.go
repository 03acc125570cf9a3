package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/wsbroker/wsbroker/opsapi"
)

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, the line limit
// grep, find and ls pass to truncateHead (bytes only).
const maxSafeInteger = 1<<53 - 1

type lsTool struct {
	ops opsapi.LsOperations
	env *toolEnv
}

func newLsTool(ops opsapi.LsOperations, env *toolEnv) Tool {
	return &lsTool{ops: ops, env: env}
}

func (t *lsTool) Definition() Definition { return definitionOf("ls") }

type lsArgs struct {
	Path  string   `json:"path"`
	Limit *float64 `json:"limit"`
}

type lsDetails struct {
	Truncation        *TruncationResult `json:"truncation,omitempty"`
	EntryLimitReached int               `json:"entryLimitReached,omitempty"`
	Hidden            int               `json:"hidden,omitempty"` // entries the policy left out
}

// effectiveLimit is pi 1.6.0's max(1, floor(limit ?? def)).
func effectiveLimit(limit *float64, def int) int {
	if limit == nil {
		return def
	}
	f := math.Floor(*limit)
	if math.IsNaN(f) || f < 1 {
		return 1
	}
	if f > maxSafeInteger {
		return maxSafeInteger
	}
	return int(f)
}

// pathMissing reports whether a Stat error means pi's exists() would have
// answered false: the path is missing or cannot be reached.
func pathMissing(err error) bool {
	for _, k := range []error{opsapi.ErrNotExist, opsapi.ErrNotDir, opsapi.ErrPermission, opsapi.ErrInvalid, opsapi.ErrDenied} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

func (t *lsTool) Execute(ctx context.Context, raw json.RawMessage, _ UpdateFunc) (Result, error) {
	var args lsArgs
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
	dirPath := t.env.resolve(p)
	limit := effectiveLimit(args.Limit, 500)

	fi, err := t.ops.Stat(ctx, dirPath)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		if pathMissing(err) {
			return Result{}, toolErrorf("Path not found: %s", dirPath)
		}
		return Result{}, err
	}
	if !fi.IsDir() {
		return Result{}, toolErrorf("Not a directory: %s", dirPath)
	}
	entries, hidden, err := t.readDir(ctx, dirPath)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		return Result{}, toolErrorf("Cannot read directory: %s", nodeErr(err, "scandir", dirPath).Error())
	}
	sortEntries(entries)

	var results []string
	limitReached := false
	for _, e := range entries {
		if len(results) >= limit {
			limitReached = true
			break
		}
		// pi stats each entry and skips those whose stat throws (a
		// dangling or escaping link); ReadDir already followed links.
		if e.Type == opsapi.TypeSymlink {
			continue
		}
		name := e.Name
		if e.IsDir() {
			name += "/"
		}
		results = append(results, name)
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	var notices []string
	var details lsDetails
	if limitReached {
		notices = append(notices, fmt.Sprintf("%d entries limit reached. Use limit=%d for more", limit, limit*2))
		details.EntryLimitReached = limit
	}
	if hidden > 0 {
		notices = append(notices, hiddenNotice(hidden, "entry", "entries"))
		details.Hidden = hidden
	}
	if len(results) == 0 {
		return emptyResult("(empty directory)", notices, details), nil
	}
	text, tr := listOutput(results, notices...)
	res := Result{Content: []Content{TextContent(text)}}
	details.Truncation = tr
	if limitReached || tr != nil || hidden > 0 {
		res.Details = details
	}
	return res, nil
}

// readDir lists dirPath, and says how many entries a policy hid when the
// workspace is one that hides some (opsapi.HidingLister).
func (t *lsTool) readDir(ctx context.Context, dirPath string) ([]opsapi.FileInfo, int, error) {
	if hl, ok := t.ops.(opsapi.HidingLister); ok {
		return hl.ReadDirHiding(ctx, dirPath)
	}
	entries, err := t.ops.ReadDir(ctx, dirPath)
	return entries, 0, err
}

// hiddenNotice says that a policy left n results out of a listing or a
// search, which pi (having no policy) never says.
func hiddenNotice(n int, one, many string) string {
	if n == 1 {
		return "1 " + one + " hidden by policy"
	}
	return fmt.Sprintf("%d %s hidden by policy", n, many)
}

// emptyResult is pi's text for a listing or search that found nothing,
// with the notices (what a policy hid) when there are any.
func emptyResult(text string, notices []string, details any) Result {
	if len(notices) == 0 {
		return Result{Content: []Content{TextContent(text)}}
	}
	return Result{Content: []Content{TextContent(text + "\n\n[" + strings.Join(notices, ". ") + "]")}, Details: details}
}

// listOutput joins a list one entry per line, keeps the first 50 KiB of
// whole lines, and appends pi's notice block: the given notices and the
// byte-limit notice. It returns the truncation when it cut.
func listOutput(lines []string, notices ...string) (string, *TruncationResult) {
	tr := TruncateHead(strings.Join(lines, "\n"), TruncationOptions{MaxLines: maxSafeInteger})
	var cut *TruncationResult
	if tr.Truncated {
		notices = append(notices, FormatSize(DefaultMaxBytes)+" limit reached")
		cut = &tr
	}
	if len(notices) == 0 {
		return tr.Content, nil
	}
	return tr.Content + "\n\n[" + strings.Join(notices, ". ") + "]", cut
}

// sortEntries orders names as pi does with
// a.toLowerCase().localeCompare(b.toLowerCase()): lower-cased, then compared
// by the Unicode collation (x/text/collate, English, which is what
// Node's ICU uses by default), with a byte comparison breaking ties so the
// order is total.
func sortEntries(entries []opsapi.FileInfo) {
	col := collate.New(language.English)
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := strings.ToLower(entries[i].Name), strings.ToLower(entries[j].Name)
		if c := col.CompareString(a, b); c != 0 {
			return c < 0
		}
		return entries[i].Name < entries[j].Name
	})
}
