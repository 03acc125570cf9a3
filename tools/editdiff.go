package tools

import (
	"strconv"
	"strings"
)

// The edit tool's result details are computed here: a line diff with
// jsdiff's diffLines semantics, pi's display diff (generateDiffString) and
// a unified patch as jsdiff's createTwoFilesPatch writes it.
//
// The line diff is a plain Myers O(ND) diff over whole lines rather than
// github.com/sergi/go-diff: go-diff's line mode encodes line indices as
// characters and then runs its character diff with time-bounded heuristics
// (half-match, DiffTimeout), which both changed between releases and can
// return a non-minimal or differently aligned script. jsdiff, which pi
// uses, is plain Myers with "delete before insert" on ties; the same
// algorithm over line tokens is short and deterministic.

// diffContext is the number of context lines pi shows and patches with.
const diffContext = 4

// Bounds on one Myers run. Past them the window is reported as "all old
// lines removed, all new lines added": still a correct patch, just not a
// minimal one. They keep a huge rewrite from costing quadratic memory.
const (
	myersMaxCost = 2000     // edit distance (lines removed + added)
	myersMaxWork = 50000000 // snake steps
)

// diffOp is a run of lines that are equal (' '), removed ('-') or added
// ('+'). Each line keeps its trailing "\n"; only a file's last line may
// lack it, and then it differs from the same text with a newline, as in
// jsdiff. The lines are held as chunks of whole lines, so that the long
// equal runs between the edits of a big file are substrings of it rather
// than one string per line.
type diffOp struct {
	kind   byte
	chunks []string
	n      int // number of lines
}

// lineCount counts the lines of a chunk of whole lines.
func lineCount(chunk string) int {
	n := strings.Count(chunk, "\n")
	if chunk != "" && chunk[len(chunk)-1] != '\n' {
		n++
	}
	return n
}

// lines returns every line of the run.
func (op diffOp) lines() []string {
	out := make([]string, 0, op.n)
	for _, c := range op.chunks {
		out = append(out, splitLinesKeep(c)...)
	}
	return out
}

// head returns the first k lines (all when there are fewer).
func (op diffOp) head(k int) []string {
	var out []string
	for _, c := range op.chunks {
		for c != "" && len(out) < k {
			i := strings.IndexByte(c, '\n') + 1
			if i == 0 {
				i = len(c)
			}
			out = append(out, c[:i])
			c = c[i:]
		}
		if len(out) == k {
			break
		}
	}
	return out
}

// tail returns the last k lines (all when there are fewer).
func (op diffOp) tail(k int) []string {
	var rev []string
	for j := len(op.chunks) - 1; j >= 0 && len(rev) < k; j-- {
		c := op.chunks[j]
		for c != "" && len(rev) < k {
			i := strings.LastIndexByte(c[:len(c)-1], '\n') + 1
			rev = append(rev, c[i:])
			c = c[:i]
		}
	}
	out := make([]string, len(rev))
	for i, l := range rev {
		out[len(rev)-1-i] = l
	}
	return out
}

// splitLinesKeep splits s into lines that keep their "\n".
func splitLinesKeep(s string) []string {
	if s == "" {
		return nil
	}
	lines := make([]string, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// lineDiff diffs two texts line by line.
func lineDiff(a, b string) []diffOp {
	var ops opBuilder
	ops.diff(splitLinesKeep(a), splitLinesKeep(b))
	return ops.finish()
}

// lfReplacement replaces text[start:end] with text. Edits produce them,
// sorted and disjoint.
type lfReplacement struct {
	start, end int
	text       string
}

// applyReplacements returns s with reps applied; reps are sorted and
// disjoint.
func applyReplacements(s string, reps []lfReplacement) string {
	var b strings.Builder
	b.Grow(len(s))
	prev := 0
	for _, r := range reps {
		b.WriteString(s[prev:r.start])
		b.WriteString(r.text)
		prev = r.end
	}
	b.WriteString(s[prev:])
	return b.String()
}

// replacementDiff diffs old against applyReplacements(old, reps) only in
// windows around the replacements (each widened to whole lines, touching
// windows merged), as pi ≥1.6.0 does: lines between windows are equal by
// construction, so a small edit of a huge file costs little.
func replacementDiff(old string, reps []lfReplacement) (newText string, ops []diffOp) {
	newText = applyReplacements(old, reps)
	var b opBuilder
	prevOld, delta := 0, 0 // delta: len(new) - len(old) before the current window
	for i := 0; i < len(reps); {
		ws := lineStartOf(old, reps[i].start)
		we, wdelta := ws, 0
		for {
			// Take in every replacement that starts on a line of the window.
			for i < len(reps) && lineStartOf(old, reps[i].start) <= we {
				r := reps[i]
				we = max(we, lineEndAfter(old, r.start, r.end))
				wdelta += len(r.text) - (r.end - r.start)
				i++
			}
			// The window must end on a line boundary in the new text too: a
			// replacement that removed a newline joins the next line to it.
			nw := newText[ws+delta : we+delta+wdelta]
			if we == len(old) || nw == "" || nw[len(nw)-1] == '\n' {
				break
			}
			we = lineEndAfter(old, we, we+1)
		}
		b.equalText(old[prevOld:ws])
		b.diff(splitLinesKeep(old[ws:we]), splitLinesKeep(newText[ws+delta:we+delta+wdelta]))
		prevOld = we
		delta += wdelta
	}
	b.equalText(old[prevOld:])
	return newText, b.finish()
}

// lineStartOf returns the offset of the line holding offset off.
func lineStartOf(s string, off int) int {
	return strings.LastIndexByte(s[:off], '\n') + 1
}

// lineEndAfter returns the offset just past the line that holds the last
// byte of old[start:end] (past its "\n", or len(old)).
func lineEndAfter(old string, start, end int) int {
	last := max(end-1, start)
	if last >= len(old) {
		return len(old)
	}
	if i := strings.IndexByte(old[last:], '\n'); i >= 0 {
		return last + i + 1
	}
	return len(old)
}

// opBuilder accumulates diff ops, merging neighbours of one kind and
// putting every removal of a change block before its additions.
type opBuilder struct {
	ops      []diffOp
	del, ins []string // the pending change block
}

func (b *opBuilder) flush() {
	if len(b.del) > 0 {
		b.ops = append(b.ops, diffOp{kind: '-', chunks: b.del, n: len(b.del)})
	}
	if len(b.ins) > 0 {
		b.ops = append(b.ops, diffOp{kind: '+', chunks: b.ins, n: len(b.ins)})
	}
	b.del, b.ins = nil, nil
}

// equal appends equal lines.
func (b *opBuilder) equal(lines []string) {
	for _, l := range lines {
		b.equalChunk(l, 1)
	}
}

// equalText appends a text of whole equal lines as one chunk.
func (b *opBuilder) equalText(text string) {
	b.equalChunk(text, lineCount(text))
}

func (b *opBuilder) equalChunk(chunk string, n int) {
	if n == 0 {
		return
	}
	b.flush()
	if k := len(b.ops); k > 0 && b.ops[k-1].kind == ' ' {
		b.ops[k-1].chunks = append(b.ops[k-1].chunks, chunk)
		b.ops[k-1].n += n
		return
	}
	b.ops = append(b.ops, diffOp{kind: ' ', chunks: []string{chunk}, n: n})
}

func (b *opBuilder) remove(lines ...string) { b.del = append(b.del, lines...) }
func (b *opBuilder) add(lines ...string)    { b.ins = append(b.ins, lines...) }

func (b *opBuilder) finish() []diffOp {
	b.flush()
	return b.ops
}

// diff appends the Myers diff of a and b.
func (b *opBuilder) diff(a, c []string) {
	// Common prefix and suffix are equal lines whatever the middle does.
	p := 0
	for p < len(a) && p < len(c) && a[p] == c[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(c)-p && a[len(a)-1-s] == c[len(c)-1-s] {
		s++
	}
	b.equal(a[:p])
	myers(b, a[p:len(a)-s], c[p:len(c)-s])
	b.equal(a[len(a)-s:])
}

// myers appends the shortest edit script from a to c (Myers 1986, forward
// greedy with a saved trace). On equal-length alternatives it prefers a
// deletion, as jsdiff does.
func myers(b *opBuilder, a, c []string) {
	n, m := len(a), len(c)
	if n == 0 || m == 0 {
		b.remove(a...)
		b.add(c...)
		return
	}
	maxD := min(n+m, myersMaxCost)
	off := maxD + 1
	v := make([]int32, 2*maxD+3) // v[k+off] = furthest x on diagonal k = x-y
	var trace [][]int32          // trace[d] = v[-d..d] before step d
	work := 0
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int32(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1]) // down: insert c[y-1]
			} else {
				x = int(v[off+k-1]) + 1 // right: delete a[x-1]
			}
			y := x - k
			for x < n && y < m && a[x] == c[y] {
				x, y = x+1, y+1
				work++
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				myersBacktrack(b, a, c, trace, d, k)
				return
			}
		}
		work += d + 1
		if work > myersMaxWork {
			break
		}
	}
	b.remove(a...)
	b.add(c...)
}

// myersBacktrack walks the trace from (len(a), len(c)) on diagonal k back
// to (0, 0), replaying the forward choices, and appends the script in
// forward order.
func myersBacktrack(b *opBuilder, a, c []string, trace [][]int32, d, k int) {
	type step struct {
		kind  byte // '-' deletes a[src], '+' inserts c[src]; 0 for d == 0
		src   int
		snake int // equal lines after the move, starting at a[x]
		x     int
	}
	steps := make([]step, d+1)
	x := len(a)
	for dd := d; dd > 0; dd-- {
		vd := trace[dd] // v[-dd..dd] as step dd found it
		at := func(kk int) int { return int(vd[kk+dd]) }
		var st step
		if k == -dd || (k != dd && at(k-1) < at(k+1)) {
			k++
			px := at(k)
			st = step{kind: '+', src: px - k, x: px}
		} else {
			k--
			px := at(k)
			st = step{kind: '-', src: px, x: px + 1}
		}
		st.snake = x - st.x
		steps[dd] = st
		x = at(k)
	}
	steps[0] = step{snake: x}
	for _, st := range steps {
		switch st.kind {
		case '+':
			b.add(c[st.src])
		case '-':
			b.remove(a[st.src])
		}
		if st.snake > 0 {
			b.equal(a[st.x : st.x+st.snake])
		}
	}
}

// displayDiff is pi's generateDiffString: changed lines as "+<n> text" and
// "-<n> text", context as " <n> text", numbers right-aligned to the width
// of the larger line count (counted as split("\n") does), at most
// diffContext lines of context around each change and " <pad> ..." where
// context is elided. Additions carry new-file numbers, removals and
// context old-file numbers. firstChanged is the new-file line number of
// the first change, 0 when there is none.
func displayDiff(oldText, newText string, ops []diffOp) (diff string, firstChanged int) {
	maxLines := max(strings.Count(oldText, "\n"), strings.Count(newText, "\n")) + 1
	width := len(strconv.Itoa(maxLines))
	pad := func(n int) string {
		s := strconv.Itoa(n)
		return strings.Repeat(" ", max(0, width-len(s))) + s
	}
	ellipsis := " " + strings.Repeat(" ", width) + " ..."
	var out []string
	oldNum, newNum := 1, 1
	context := func(lines []string) {
		for _, l := range lines {
			out = append(out, " "+pad(oldNum)+" "+strings.TrimSuffix(l, "\n"))
			oldNum++
			newNum++
		}
	}
	skip := func(n int) {
		out = append(out, ellipsis)
		oldNum += n
		newNum += n
	}
	lastWasChange := false
	for i, op := range ops {
		if op.kind != ' ' {
			if firstChanged == 0 {
				firstChanged = newNum
			}
			for _, l := range op.lines() {
				if op.kind == '+' {
					out = append(out, "+"+pad(newNum)+" "+strings.TrimSuffix(l, "\n"))
					newNum++
				} else {
					out = append(out, "-"+pad(oldNum)+" "+strings.TrimSuffix(l, "\n"))
					oldNum++
				}
			}
			lastWasChange = true
			continue
		}
		nextIsChange := i+1 < len(ops)
		switch {
		case lastWasChange && nextIsChange:
			if op.n > 2*diffContext {
				context(op.head(diffContext))
				skip(op.n - 2*diffContext)
				context(op.tail(diffContext))
			} else {
				context(op.lines())
			}
		case nextIsChange:
			if op.n > diffContext {
				skip(op.n - diffContext)
			}
			context(op.tail(diffContext))
		case lastWasChange:
			context(op.head(diffContext))
			if op.n > diffContext {
				skip(op.n - diffContext)
			}
		default:
			oldNum += op.n
			newNum += op.n
		}
		lastWasChange = false
	}
	return strings.Join(out, "\n"), firstChanged
}

// noNewlineMarker follows a hunk line that has no "\n" (a file's last line).
const noNewlineMarker = `\ No newline at end of file`

// unifiedPatch is jsdiff's createTwoFilesPatch(path, path, old, new,
// undefined, undefined, {context: 4, headerOptions: FILE_HEADERS_ONLY}):
// "--- path" and "+++ path" headers, then hunks "@@ -a,b +c,d @@" (counts
// always written; a start is one lower when its count is 0), hunks merged
// when at most 2*context equal lines separate two changes.
func unifiedPatch(path string, ops []diffOp) string {
	var b strings.Builder
	b.WriteString("--- " + path + "\n+++ " + path + "\n")

	type hunk struct {
		oldStart, newStart, oldLines, newLines int
		body                                   strings.Builder
	}
	var h *hunk
	write := func(kind byte, lines []string) {
		for _, l := range lines {
			h.body.WriteByte(kind)
			if text, ok := strings.CutSuffix(l, "\n"); ok {
				h.body.WriteString(text + "\n")
			} else {
				h.body.WriteString(text + "\n" + noNewlineMarker + "\n")
			}
			if kind != '+' {
				h.oldLines++
			}
			if kind != '-' {
				h.newLines++
			}
		}
	}
	closeHunk := func() {
		oldStart, newStart := h.oldStart, h.newStart
		if h.oldLines == 0 {
			oldStart--
		}
		if h.newLines == 0 {
			newStart--
		}
		b.WriteString("@@ -" + strconv.Itoa(oldStart) + "," + strconv.Itoa(h.oldLines) +
			" +" + strconv.Itoa(newStart) + "," + strconv.Itoa(h.newLines) + " @@\n")
		b.WriteString(h.body.String())
		h = nil
	}

	oldNum, newNum := 1, 1 // numbers of the next line in each file
	var lead []string      // context for a hunk that has not started yet
	for i, op := range ops {
		if op.kind != ' ' {
			if h == nil {
				h = &hunk{oldStart: oldNum - len(lead), newStart: newNum - len(lead)}
				write(' ', lead)
				lead = nil
			}
			write(op.kind, op.lines())
			if op.kind == '-' {
				oldNum += op.n
			} else {
				newNum += op.n
			}
			continue
		}
		last := i == len(ops)-1
		switch {
		case h != nil && !last && op.n <= 2*diffContext:
			write(' ', op.lines()) // the hunk goes on past this short gap
		case h != nil:
			write(' ', op.head(diffContext))
			closeHunk()
			fallthrough
		default:
			if !last {
				lead = op.tail(diffContext)
			}
		}
		oldNum += op.n
		newNum += op.n
	}
	if h != nil {
		closeHunk()
	}
	return b.String()
}
