package tools

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// applyUnifiedPatch applies a unified patch as patch(1) would, strictly:
// every context and removed line must match, hunk counts must add up, and
// "\ No newline at end of file" takes the newline off the line before it.
func applyUnifiedPatch(old, patch string) (string, error) {
	src := splitLinesKeep(old)
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", fmt.Errorf("missing file headers in %q", patch)
	}
	var out []string
	pos := 0 // next unread line of src
	for i := 2; i < len(lines); {
		var a, b, c, d int
		if _, err := fmt.Sscanf(lines[i], "@@ -%d,%d +%d,%d @@", &a, &b, &c, &d); err != nil {
			return "", fmt.Errorf("line %d: bad hunk header %q", i, lines[i])
		}
		start := a - 1
		if b == 0 {
			start = a
		}
		if start < pos || start > len(src) {
			return "", fmt.Errorf("hunk %q starts at %d, already at %d of %d", lines[i], start, pos, len(src))
		}
		if want := c - 1; d > 0 && want != len(out)+start-pos {
			return "", fmt.Errorf("hunk %q: new start %d, but output would be at %d", lines[i], c, len(out)+start-pos+1)
		}
		out = append(out, src[pos:start]...)
		pos = start
		i++
		gotOld, gotNew := 0, 0
		for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			text := l[1:] + "\n"
			if i+1 < len(lines) && lines[i+1] == noNewlineMarker {
				text = l[1:]
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != text {
					return "", fmt.Errorf("hunk line %q does not match source line %d", l, pos+1)
				}
				pos++
				gotOld++
				if l[0] == ' ' {
					out = append(out, text)
					gotNew++
				}
			case '+':
				out = append(out, text)
				gotNew++
			default:
				return "", fmt.Errorf("bad hunk line %q", l)
			}
			i++
		}
		if gotOld != b || gotNew != d {
			return "", fmt.Errorf("hunk counts -%d +%d, lines -%d +%d", b, d, gotOld, gotNew)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, ""), nil
}

// checkOps verifies that ops turn a into b.
func checkOps(t *testing.T, a, b string, ops []diffOp) {
	t.Helper()
	var gotA, gotB strings.Builder
	var linesA, linesB []string
	for i, op := range ops {
		if op.n == 0 || op.n != len(op.lines()) {
			t.Fatalf("op %d has %d lines, counted %d", i, len(op.lines()), op.n)
		}
		if i > 0 && ops[i-1].kind == op.kind {
			t.Fatalf("ops %d and %d are both %q: not merged", i-1, i, op.kind)
		}
		if i > 0 && ops[i-1].kind == '+' && op.kind == '-' {
			t.Fatalf("op %d: removal after addition in one change block", i)
		}
		for _, l := range op.lines() {
			if op.kind != '+' {
				gotA.WriteString(l)
				linesA = append(linesA, l)
			}
			if op.kind != '-' {
				gotB.WriteString(l)
				linesB = append(linesB, l)
			}
		}
	}
	if gotA.String() != a || gotB.String() != b {
		t.Fatalf("ops rebuild\n%q -> %q\nwant\n%q -> %q", gotA.String(), gotB.String(), a, b)
	}
	// Every token must be a whole line of its text.
	for _, lines := range [][]string{linesA, linesB} {
		for i, l := range lines[:max(0, len(lines)-1)] {
			if !strings.HasSuffix(l, "\n") {
				t.Fatalf("token %d %q is not a whole line of %q -> %q", i, l, a, b)
			}
		}
	}
}

// lcsCost is the minimal number of removed plus added lines.
func lcsCost(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return len(a) + len(b) - 2*prev[len(b)]
}

func opsCost(ops []diffOp) int {
	n := 0
	for _, op := range ops {
		if op.kind != ' ' {
			n += op.n
		}
	}
	return n
}

func TestDiffLineDiffSmall(t *testing.T) {
	cases := []struct {
		a, b string
		want string // ops rendered as kind+line per line
	}{
		{"a\nb\nc\n", "a\nB\nc\n", " a\n-b\n+B\n c\n"},
		{"a\nb\n", "a\nb\nc\n", " a\n b\n+c\n"},
		{"a\nb", "a\nb\n", " a\n-b+b\n"},
		{"", "x\n", "+x\n"},
		{"x\n", "", "-x\n"},
		{"a\nb\n", "b\na\n", "-a\n b\n+a\n"}, // a deletion is preferred on ties, as in jsdiff
	}
	for _, c := range cases {
		ops := lineDiff(c.a, c.b)
		checkOps(t, c.a, c.b, ops)
		var got strings.Builder
		for _, op := range ops {
			for _, l := range op.lines() {
				got.WriteString(string(op.kind) + l)
			}
		}
		if got.String() != c.want {
			t.Errorf("lineDiff(%q, %q) = %q, want %q", c.a, c.b, got.String(), c.want)
		}
	}
}

// randomText builds a text from a small line alphabet, so that diffs have
// many equal lines and ties.
func randomText(r *rand.Rand, maxLines int) string {
	alphabet := []string{"a", "b", "c", "d", "", "  x", "€"}
	var b strings.Builder
	n := r.IntN(maxLines + 1)
	for i := 0; i < n; i++ {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
		if i < n-1 || r.IntN(4) != 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestDiffLineDiffRandomIsMinimalAndPatchApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		a, b := randomText(r, 12), randomText(r, 12)
		ops := lineDiff(a, b)
		checkOps(t, a, b, ops)
		if got, want := opsCost(ops), lcsCost(splitLinesKeep(a), splitLinesKeep(b)); got != want {
			t.Fatalf("lineDiff(%q, %q) costs %d lines, the minimum is %d", a, b, got, want)
		}
		if a == b {
			continue
		}
		patch := unifiedPatch("f.txt", ops)
		got, err := applyUnifiedPatch(a, patch)
		if err != nil || got != b {
			t.Fatalf("patch of %q -> %q does not apply (%v, got %q):\n%s", a, b, err, got, patch)
		}
	}
}

func TestDiffMyersFallsBackBeyondItsBudget(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < myersMaxCost; i++ {
		fmt.Fprintf(&a, "old %d\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	a.WriteString("same\n")
	b.WriteString("same\n")
	ops := lineDiff(a.String(), b.String())
	checkOps(t, a.String(), b.String(), ops)
	if len(ops) != 3 || ops[0].kind != '-' || ops[1].kind != '+' || ops[2].kind != ' ' {
		t.Fatalf("want one removal, one addition, one equal run; got %d ops", len(ops))
	}
}

func TestDiffReplacementDiffMatchesWholeDiff(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		old := randomText(r, 15)
		// Random disjoint replacements.
		var reps []lfReplacement
		pos := 0
		for pos < len(old) && len(reps) < 3 {
			start := pos + r.IntN(len(old)-pos)
			end := start + 1 + r.IntN(min(6, len(old)-start))
			reps = append(reps, lfReplacement{start: start, end: end, text: randomText(r, 2)})
			pos = end + r.IntN(3)
		}
		if len(reps) == 0 {
			continue
		}
		newText, ops := replacementDiff(old, reps)
		if want := applyReplacements(old, reps); newText != want {
			t.Fatalf("newText %q, want %q", newText, want)
		}
		checkOps(t, old, newText, ops)
		if got, want := opsCost(ops), lcsCost(splitLinesKeep(old), splitLinesKeep(newText)); got < want {
			t.Fatalf("impossible: cost %d below minimum %d", got, want)
		}
		if old == newText {
			continue
		}
		got, err := applyUnifiedPatch(old, unifiedPatch("f.txt", ops))
		if err != nil || got != newText {
			t.Fatalf("windowed patch of %q with %+v does not apply: %v", old, reps, err)
		}
	}
}

func TestDiffDisplayDiffFormat(t *testing.T) {
	old := "a\nb\nc\n"
	newText := "a\nB\nc\n"
	diff, first := displayDiff(old, newText, lineDiff(old, newText))
	if want := " 1 a\n-2 b\n+2 B\n 3 c"; diff != want {
		t.Errorf("diff =\n%s\nwant\n%s", diff, want)
	}
	if first != 2 {
		t.Errorf("firstChanged = %d, want 2", first)
	}
}

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	return b.String()
}

func TestDiffDisplayDiffElidesContext(t *testing.T) {
	// 20 lines; line 10 changes: 4 lines of context each side, "..."
	// beyond, numbers padded to the width of 21 (split("\n") counts the
	// empty piece after the last newline).
	old := numbered(1, 20)
	newText := strings.Replace(old, "line 10\n", "line ten\n", 1)
	diff, first := displayDiff(old, newText, lineDiff(old, newText))
	want := strings.Join([]string{
		"    ...",
		"  6 line 6",
		"  7 line 7",
		"  8 line 8",
		"  9 line 9",
		"-10 line 10",
		"+10 line ten",
		" 11 line 11",
		" 12 line 12",
		" 13 line 13",
		" 14 line 14",
		"    ...",
	}, "\n")
	if diff != want {
		t.Errorf("diff =\n%s\nwant\n%s", diff, want)
	}
	if first != 10 {
		t.Errorf("firstChanged = %d, want 10", first)
	}

	// Two changes 20 lines apart: the context between them is cut in the
	// middle; an addition shifts the new-file numbers after it.
	old = numbered(1, 40)
	newText = strings.Replace(old, "line 5\n", "line 5\ninserted\n", 1)
	newText = strings.Replace(newText, "line 30\n", "", 1)
	diff, first = displayDiff(old, newText, lineDiff(old, newText))
	want = strings.Join([]string{
		"    ...",
		"  2 line 2",
		"  3 line 3",
		"  4 line 4",
		"  5 line 5",
		"+ 6 inserted",
		"  6 line 6",
		"  7 line 7",
		"  8 line 8",
		"  9 line 9",
		"    ...",
		" 26 line 26",
		" 27 line 27",
		" 28 line 28",
		" 29 line 29",
		"-30 line 30",
		" 31 line 31",
		" 32 line 32",
		" 33 line 33",
		" 34 line 34",
		"    ...",
	}, "\n")
	if diff != want {
		t.Errorf("diff =\n%s\nwant\n%s", diff, want)
	}
	if first != 6 {
		t.Errorf("firstChanged = %d, want 6", first)
	}
}

func TestDiffDisplayDiffShortGapShownWhole(t *testing.T) {
	old := numbered(1, 12)
	newText := strings.Replace(old, "line 2\n", "two\n", 1)
	newText = strings.Replace(newText, "line 11\n", "eleven\n", 1)
	diff, _ := displayDiff(old, newText, lineDiff(old, newText))
	if strings.Contains(diff, "...") {
		t.Errorf("8 lines between changes must be shown whole:\n%s", diff)
	}
	for i := 3; i <= 10; i++ {
		if !strings.Contains(diff, "line "+strconv.Itoa(i)+"\n") {
			t.Errorf("line %d missing:\n%s", i, diff)
		}
	}
}

func TestPatchFormat(t *testing.T) {
	old := "a\nb\nc\n"
	newText := "a\nB\nc\n"
	got := unifiedPatch("dir/f.txt", lineDiff(old, newText))
	want := "--- dir/f.txt\n+++ dir/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
	if got != want {
		t.Errorf("patch =\n%s\nwant\n%s", got, want)
	}

	// Missing final newlines are marked after the line that lacks one.
	got = unifiedPatch("f", lineDiff("a\nb", "a\nc"))
	want = "--- f\n+++ f\n@@ -1,2 +1,2 @@\n a\n-b\n" + noNewlineMarker + "\n+c\n" + noNewlineMarker + "\n"
	if got != want {
		t.Errorf("patch =\n%s\nwant\n%s", got, want)
	}
	got = unifiedPatch("f", lineDiff("x\nend", "y\nend"))
	want = "--- f\n+++ f\n@@ -1,2 +1,2 @@\n-x\n+y\n end\n" + noNewlineMarker + "\n"
	if got != want {
		t.Errorf("patch =\n%s\nwant\n%s", got, want)
	}

	// An empty side has start 0.
	got = unifiedPatch("f", lineDiff("gone\n", ""))
	want = "--- f\n+++ f\n@@ -1,1 +0,0 @@\n-gone\n"
	if got != want {
		t.Errorf("patch =\n%s\nwant\n%s", got, want)
	}
}

func TestPatchHunksSplitAndMerge(t *testing.T) {
	old := numbered(1, 40)
	// Changes at 5 and 14: 8 equal lines between, one hunk. Change at 30:
	// 15 equal lines after 14, a second hunk.
	newText := strings.Replace(old, "line 5\n", "five\n", 1)
	newText = strings.Replace(newText, "line 14\n", "fourteen\n", 1)
	newText = strings.Replace(newText, "line 30\n", "thirty\n", 1)
	patch := unifiedPatch("f", lineDiff(old, newText))
	var headers []string
	for _, l := range strings.Split(patch, "\n") {
		if strings.HasPrefix(l, "@@") {
			headers = append(headers, l)
		}
	}
	want := []string{"@@ -1,18 +1,18 @@", "@@ -26,9 +26,9 @@"}
	if strings.Join(headers, "|") != strings.Join(want, "|") {
		t.Errorf("hunks %q, want %q\n%s", headers, want, patch)
	}
	if got, err := applyUnifiedPatch(old, patch); err != nil || got != newText {
		t.Fatalf("patch does not apply: %v", err)
	}
}

// TestPatchGitApply checks the patch with an independent applier.
func TestPatchGitApply(t *testing.T) {
	git := testutil.RequireCommand(t, "git")
	cases := []struct{ old, new string }{
		{numbered(1, 30), strings.Replace(numbered(1, 30), "line 15\n", "fifteen\nand more\n", 1)},
		{"a\nb", "a\nc"},
		{"a\nb", "a\nb\n"},
		{"a\nb\n", "a\nb"},
		{"only\n", ""},
		{numbered(1, 3), numbered(1, 3) + "tail"},
	}
	for i, c := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(c.old), 0o644); err != nil {
			t.Fatal(err)
		}
		patch := unifiedPatch("f.txt", lineDiff(c.old, c.new))
		if err := os.WriteFile(filepath.Join(dir, "p.diff"), []byte(patch), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(git, "apply", "-p0", "--unsafe-paths", "p.diff")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("case %d: git apply: %v\n%s\n%s", i, err, out, patch)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.new {
			t.Errorf("case %d: git apply gave %q, want %q", i, got, c.new)
		}
	}
}

func TestDiffOpHeadTail(t *testing.T) {
	op := diffOp{kind: ' ', chunks: []string{"a\nb\n", "c\n", "d\ne"}, n: 5}
	if got := strings.Join(op.head(2), "|"); got != "a\n|b\n" {
		t.Errorf("head(2) = %q", got)
	}
	if got := strings.Join(op.head(4), "|"); got != "a\n|b\n|c\n|d\n" {
		t.Errorf("head(4) = %q", got)
	}
	if got := strings.Join(op.tail(3), "|"); got != "c\n|d\n|e" {
		t.Errorf("tail(3) = %q", got)
	}
	if got := strings.Join(op.tail(9), ""); got != "a\nb\nc\nd\ne" {
		t.Errorf("tail(9) = %q", got)
	}
	if got := len(op.lines()); got != 5 {
		t.Errorf("lines() has %d", got)
	}
	empty := diffOp{kind: ' ', chunks: []string{"\n\n"}, n: 2}
	if got := strings.Join(empty.tail(1), "|"); got != "\n" {
		t.Errorf("tail of empty lines = %q", got)
	}
}
