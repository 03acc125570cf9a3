package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

// maxEditFileBytes bounds the file edit reads into memory (the text, its
// LF and fuzzy views and the diff all live there at once).
const maxEditFileBytes = 64 << 20

// utf8BOM is stripped before matching and put back on write.
const utf8BOM = "\uFEFF"

// EditDetails is the edit tool's Result.Details (pi's EditToolDetails).
type EditDetails struct {
	// Diff is pi's display diff: "+<n> text", "-<n> text", " <n> text".
	Diff string `json:"diff"`
	// Patch is a unified patch from the old to the new LF-normalized text.
	Patch string `json:"patch"`
	// FirstChangedLine is the new file's line number of the first change.
	FirstChangedLine int `json:"firstChangedLine,omitempty"`
}

// editSpec is one replacement as the model sends it.
type editSpec struct {
	OldText string `json:"oldText"`
	NewText string `json:"newText"`
}

type editTool struct {
	ops opsapi.EditOperations
	env *toolEnv
}

func newEditTool(ops opsapi.EditOperations, env *toolEnv) Tool {
	return &editTool{ops: ops, env: env}
}

func (t *editTool) Definition() Definition { return definitionOf("edit") }

// PrepareArguments is pi's prepareEditArguments (1.6.0): it repairs the
// shapes models still send before validation sees them. edits given as a
// JSON string is parsed (an array, or one object wrapped in one); one
// object becomes a one-element array; legacy top-level oldText/newText
// strings are appended as the last edit and removed. Anything else,
// including valid input, is returned as it came (the same map).
func (t *editTool) PrepareArguments(args any) any {
	in, ok := args.(map[string]any)
	if !ok {
		return args
	}
	out, cloned := in, false
	clone := func() { // valid input keeps its identity; repairs work on a copy
		if !cloned {
			out, cloned = make(map[string]any, len(in)+1), true
			for k, v := range in {
				out[k] = v
			}
		}
	}
	if s, ok := in["edits"].(string); ok {
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err == nil {
			switch p := parsed.(type) {
			case []any:
				clone()
				out["edits"] = p
			case map[string]any:
				clone()
				out["edits"] = []any{p}
			}
		}
	}
	if obj, ok := out["edits"].(map[string]any); ok {
		clone()
		out["edits"] = []any{obj}
	}
	oldText, okOld := out["oldText"].(string)
	newText, okNew := out["newText"].(string)
	if okOld && okNew {
		clone()
		var edits []any
		if existing, ok := out["edits"].([]any); ok {
			edits = append(edits, existing...)
		}
		out["edits"] = append(edits, map[string]any{"oldText": oldText, "newText": newText})
		delete(out, "oldText")
		delete(out, "newText")
	}
	return out
}

// Execute replaces each edits[].oldText, which must occur exactly once in
// the file, with its newText, all or nothing, under the file's mutation
// queue.
func (t *editTool) Execute(ctx context.Context, args json.RawMessage, _ UpdateFunc) (Result, error) {
	var in struct {
		Path  string     `json:"path"`
		Edits []editSpec `json:"edits"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return Result{}, toolErrorf("Edit tool input is invalid. %v", err)
	}
	if len(in.Edits) == 0 {
		return Result{}, toolError("Edit tool input is invalid. edits must contain at least one replacement.")
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	abs := t.env.resolve(in.Path)
	var res Result
	err := t.env.lockFile(ctx, abs, func() error {
		var err error
		res, err = t.edit(ctx, in.Path, abs, in.Edits)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// edit is the read-modify-write; it runs inside the mutation queue.
func (t *editTool) edit(ctx context.Context, path, abs string, edits []editSpec) (Result, error) {
	if err := t.ops.Access(ctx, abs, opsapi.AccessRead|opsapi.AccessWrite); err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		if code := errnoName(err); code != "" {
			return Result{}, toolErrorf("Could not edit file: %s. Error code: %s.", path, code)
		}
		return Result{}, toolErrorf("Could not edit file: %s. Error: %s.", path, innermostMessage(err))
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	raw, err := t.readAll(ctx, path, abs)
	if err != nil {
		return Result{}, err
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}

	content, bom := strings.CutPrefix(string(raw), utf8BOM)
	out, err := applyEdits(content, edits, path)
	if err != nil {
		return Result{}, err
	}
	diff, first := displayDiff(out.oldLF, out.newLF, out.ops)
	patch := unifiedPatch(path, out.ops)

	final := out.content
	if bom {
		final = utf8BOM + final
	}
	if err := checkAbort(ctx); err != nil {
		return Result{}, err
	}
	if err := t.ops.WriteFile(ctx, abs, strings.NewReader(final)); err != nil {
		if ctx.Err() != nil {
			return Result{}, errAborted
		}
		return Result{}, nodeErr(err, "open", abs)
	}
	t.env.logger.Debug("edited file", "path", abs, "edits", len(edits), "bytes", len(final))
	return Result{
		Content: []Content{TextContent(fmt.Sprintf("Successfully replaced %d block(s) in %s.", len(edits), path))},
		Details: EditDetails{Diff: diff, Patch: patch, FirstChangedLine: first},
	}, nil
}

// readAll reads the whole file, refusing one larger than maxEditFileBytes.
func (t *editTool) readAll(ctx context.Context, path, abs string) ([]byte, error) {
	rc, err := t.ops.Open(ctx, abs)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errAborted
		}
		if errnoName(err) == "EISDIR" {
			return nil, nodeErr(err, "read", "") // Node's readFile on a directory
		}
		return nil, nodeErr(err, "open", abs)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, maxEditFileBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, nodeErr(err, "read", "")
	}
	if len(raw) > maxEditFileBytes {
		return nil, toolErrorf("Could not edit file: %s. The file is larger than %s, the most the edit tool reads; use bash (e.g. sed) to change it.",
			path, FormatSize(maxEditFileBytes))
	}
	return raw, nil
}

// innermostMessage is the message of err's deepest cause: pi prints a
// thrown Error as "Error: <message>", and the message the model needs is
// the backend's, not our wrapping.
func innermostMessage(err error) string {
	for {
		if oe, ok := err.(*opsapi.Error); ok {
			switch {
			case oe.Err != nil:
				err = oe.Err
				continue
			case oe.Kind != nil:
				return oe.Kind.Error()
			}
			return oe.Error()
		}
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// editOutcome is a successful application of edits.
type editOutcome struct {
	content string          // the new text, original line endings kept, no BOM
	oldLF   string          // the old text with every line ending as "\n"
	newLF   string          // the new text likewise
	ops     []diffOp        // line diff from oldLF to newLF
	reps    []lfReplacement // what changed, in oldLF, whole lines after a fuzzy match
}

// applyEdits applies edits to content (without BOM) the way pi 1.6.0
// does, or fails without a change:
//   - matching is done on the LF-normalized text, with oldText and newText
//     normalized the same way;
//   - each oldText is looked for exactly; if any needs fuzzy matching, all
//     are matched in the fuzzy view, and occurrences are always counted
//     there;
//   - every edit is matched against the original, and they must not
//     overlap;
//   - after a fuzzy match only the lines a replacement touches come from
//     the fuzzy view; every other line is kept byte for byte;
//   - the replacements are spliced into the original text, so untouched
//     lines keep their own endings (CRLF, LF, CR, mixed) and inserted
//     newlines take the ending of the line where a replacement starts.
//
// path only appears in error messages.
func applyEdits(content string, edits []editSpec, path string) (editOutcome, error) {
	single := len(edits) == 1
	norm, err := normalizeEdits(edits, path)
	if err != nil {
		return editOutcome{}, err
	}
	orig := indexEndings(content)
	lf := orig.lf
	fuzzyLF := normalizeForFuzzyMatch(lf)
	base, usedFuzzy := matchView(lf, fuzzyLF, norm)
	reps, err := matchEdits(base, fuzzyLF, norm, path)
	if err != nil {
		return editOutcome{}, err
	}
	if !replacementsChange(base, reps) {
		return editOutcome{}, noChangeError(single, path)
	}
	if usedFuzzy {
		if reps, err = widenToLines(lf, fuzzyLF, reps); err != nil {
			return editOutcome{}, err
		}
	}
	newLF, ops := replacementDiff(lf, reps)
	if newLF == lf {
		return editOutcome{}, noChangeError(single, path) // the fuzzy view changed, the file would not
	}
	return editOutcome{
		content: orig.splice(reps),
		oldLF:   lf,
		newLF:   newLF,
		ops:     ops,
		reps:    reps,
	}, nil
}

// normalizeEdits gives every oldText and newText LF line endings and
// refuses an empty oldText.
func normalizeEdits(edits []editSpec, path string) ([]editSpec, error) {
	norm := make([]editSpec, len(edits))
	for i, e := range edits {
		norm[i] = editSpec{OldText: normalizeLF(e.OldText), NewText: normalizeLF(e.NewText)}
		if norm[i].OldText == "" {
			if len(edits) == 1 {
				return nil, toolErrorf("oldText must not be empty in %s.", path)
			}
			return nil, toolErrorf("edits[%d].oldText must not be empty in %s.", i, path)
		}
	}
	return norm, nil
}

// matchView is the text every edit is matched in: the LF text, or the
// fuzzy view as soon as one edit needs fuzzy matching.
func matchView(lf, fuzzyLF string, norm []editSpec) (base string, usedFuzzy bool) {
	for _, e := range norm {
		if m, ok := fuzzyFind(lf, fuzzyLF, e.OldText); ok && m.fuzzy {
			return fuzzyLF, true
		}
	}
	return lf, false
}

// matchEdits finds each edit's oldText in base, once and only once, and
// returns the replacements in text order; edits must not overlap.
func matchEdits(base, fuzzyLF string, norm []editSpec, path string) ([]lfReplacement, error) {
	single := len(norm) == 1
	type matched struct {
		edit          int
		start, length int
	}
	matches := make([]matched, 0, len(norm))
	for i, e := range norm {
		m, ok := fuzzyFind(base, fuzzyLF, e.OldText)
		if !ok {
			if single {
				return nil, toolErrorf("Could not find the exact text in %s. The old text must match exactly including all whitespace and newlines.", path)
			}
			return nil, toolErrorf("Could not find edits[%d] in %s. The oldText must match exactly including all whitespace and newlines.", i, path)
		}
		if n := countFuzzyOccurrences(base, fuzzyLF, e.OldText); n > 1 {
			if single {
				return nil, toolErrorf("Found %d occurrences of the text in %s. The text must be unique. Please provide more context to make it unique.", n, path)
			}
			return nil, toolErrorf("Found %d occurrences of edits[%d] in %s. Each oldText must be unique. Please provide more context to make it unique.", n, i, path)
		}
		matches = append(matches, matched{edit: i, start: m.index, length: m.length})
	}
	sort.SliceStable(matches, func(a, b int) bool { return matches[a].start < matches[b].start })
	reps := make([]lfReplacement, len(matches))
	for i, m := range matches {
		if i > 0 {
			prev := matches[i-1]
			if prev.start+prev.length > m.start {
				return nil, toolErrorf("edits[%d] and edits[%d] overlap in %s. Merge them into one edit or target disjoint regions.", prev.edit, m.edit, path)
			}
		}
		reps[i] = lfReplacement{start: m.start, end: m.start + m.length, text: norm[m.edit].NewText}
	}
	return reps, nil
}

// noChangeError is pi's error for edits that change nothing.
func noChangeError(single bool, path string) error {
	if single {
		return toolErrorf("No changes made to %s. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.", path)
	}
	return toolErrorf("No changes made to %s. The replacements produced identical content.", path)
}

// replacementsChange reports whether applying reps to s changes it,
// without building the result.
func replacementsChange(s string, reps []lfReplacement) bool {
	delta := 0
	for _, r := range reps {
		delta += len(r.text) - (r.end - r.start)
	}
	if delta != 0 {
		return true
	}
	pos := 0 // how much of s the result has been compared with
	same := func(piece string) bool {
		ok := s[pos:pos+len(piece)] == piece
		pos += len(piece)
		return ok
	}
	prev := 0
	for _, r := range reps {
		if !same(s[prev:r.start]) || !same(r.text) {
			return true
		}
		prev = r.end
	}
	return !same(s[prev:])
}

// normalizeLF turns CRLF and lone CR into LF.
func normalizeLF(s string) string {
	if strings.IndexByte(s, '\r') < 0 {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// widenToLines turns replacements found in the fuzzy view into
// replacements of the LF text that cover whole lines (pi ≥0.79.9
// applyReplacementsPreservingUnchangedLines, 1.6.0 widenReplacementsToLines):
// a replacement grows to the start of its first line and the end of its
// last (its "\n" included only when the match consumed it), replacements
// sharing a line are merged, and the new text of each group is its lines
// from the fuzzy view with the replacements applied. Lines no replacement
// touches are then left exactly as they are in lf.
func widenToLines(lf, fuzzy string, reps []lfReplacement) ([]lfReplacement, error) {
	lfStarts, fzStarts := lineStarts(lf), lineStarts(fuzzy)
	if len(lfStarts) != len(fzStarts) {
		return nil, toolError("Cannot preserve unchanged lines because the base content has a different line count.")
	}
	// lineEnd is the offset of line i's "\n" (or the text's end).
	lineEnd := func(starts []int, text string, i int) int {
		if i+1 < len(starts) {
			return starts[i+1] - 1
		}
		return len(text)
	}
	type group struct {
		first, last int  // line range
		consumedNL  bool // the group's end includes the last line's "\n"
		start, end  int  // fuzzy offsets
		inner       []lfReplacement
	}
	var groups []group
	for _, r := range reps {
		first := lineOf(fzStarts, r.start)
		last := lineOf(fzStarts, max(r.end-1, r.start))
		end := lineEnd(fzStarts, fuzzy, last)
		consumed := r.end > end
		start := fzStarts[first]
		if consumed {
			end = r.end
		}
		if n := len(groups); n > 0 && start < groups[n-1].end {
			g := &groups[n-1]
			if end > g.end {
				g.end, g.last, g.consumedNL = end, last, consumed
			}
			g.inner = append(g.inner, r)
			continue
		}
		groups = append(groups, group{first: first, last: last, consumedNL: consumed, start: start, end: end, inner: []lfReplacement{r}})
	}
	out := make([]lfReplacement, len(groups))
	for i, g := range groups {
		inner := make([]lfReplacement, len(g.inner))
		for j, r := range g.inner {
			inner[j] = lfReplacement{start: r.start - g.start, end: r.end - g.start, text: r.text}
		}
		lfEnd := lineEnd(lfStarts, lf, g.last)
		if g.consumedNL {
			lfEnd = lfStarts[g.last+1]
		}
		out[i] = lfReplacement{start: lfStarts[g.first], end: lfEnd, text: applyReplacements(fuzzy[g.start:g.end], inner)}
	}
	return out, nil
}

// lineStarts returns the offset of every line of s; a text with n "\n"
// has n+1 lines (the last possibly empty).
func lineStarts(s string) []int {
	starts := make([]int, 1, strings.Count(s, "\n")+1)
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// lineOf returns the line holding offset off.
func lineOf(starts []int, off int) int {
	return sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1
}

// endings maps a text to its LF-normalized form and back. Only the lines
// that do not end in "\n" are recorded, so a plain LF file costs nothing.
type endings struct {
	text string
	lf   string
	crlf []int // lf offsets of the "\n" of each line that ended in "\r\n"
	cr   []int // lf offsets of the "\n" of each line that ended in a lone "\r"
}

func indexEndings(text string) *endings {
	e := &endings{text: text, lf: text}
	if strings.IndexByte(text, '\r') < 0 {
		return e
	}
	var b strings.Builder
	b.Grow(len(text))
	seg := 0
	for i := 0; i < len(text); i++ {
		if text[i] != '\r' {
			continue
		}
		b.WriteString(text[seg:i])
		if i+1 < len(text) && text[i+1] == '\n' {
			e.crlf = append(e.crlf, b.Len())
			i++
		} else {
			e.cr = append(e.cr, b.Len())
		}
		b.WriteByte('\n')
		seg = i + 1
	}
	b.WriteString(text[seg:])
	e.lf = b.String()
	return e
}

// toText maps an offset of lf to text: a position at a line's "\n" maps to
// the start of that line's ending, so a match never splits a CRLF.
func (e *endings) toText(off int) int {
	return off + sort.SearchInts(e.crlf, off) // each earlier CRLF is one byte longer
}

// eolAt is the original ending of the line whose "\n" is at lf offset p.
func (e *endings) eolAt(p int) string {
	if i := sort.SearchInts(e.crlf, p); i < len(e.crlf) && e.crlf[i] == p {
		return "\r\n"
	}
	if i := sort.SearchInts(e.cr, p); i < len(e.cr) && e.cr[i] == p {
		return "\r"
	}
	return "\n"
}

// newlineFor is the ending inserted newlines get in a replacement that
// starts at lf offset off: its line's own, else (the last line has none)
// the previous line's, else "\n".
func (e *endings) newlineFor(off int) string {
	if i := strings.IndexByte(e.lf[off:], '\n'); i >= 0 {
		return e.eolAt(off + i)
	}
	if i := strings.LastIndexByte(e.lf[:off], '\n'); i >= 0 {
		return e.eolAt(i)
	}
	return "\n"
}

// splice applies LF-space replacements to the original text. Should a
// splice put a lone-CR ending right before an "\n" (which would read as one
// CRLF ending and swallow a line), a "\r" is added so that the new text
// still has the lines its LF form has.
func (e *endings) splice(reps []lfReplacement) string {
	var b strings.Builder
	b.Grow(len(e.text))
	write := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 && s[0] == '\n' && strings.HasSuffix(b.String(), "\r") {
			b.WriteByte('\r')
		}
		b.WriteString(s)
	}
	prev := 0
	for _, r := range reps {
		start, end := e.toText(r.start), e.toText(r.end)
		write(e.text[prev:start])
		write(strings.ReplaceAll(r.text, "\n", e.newlineFor(r.start)))
		prev = end
	}
	write(e.text[prev:])
	return b.String()
}
