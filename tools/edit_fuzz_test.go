package tools

import (
	"context"
	"strings"
	"testing"
)

// FuzzApplyEdits runs the edit tool on arbitrary files and edits. It must
// never panic; a failed edit leaves the file as it was and writes nothing;
// a successful one contains every newText, keeps the bytes between its
// replacements (so untouched lines keep their text and endings), agrees
// with its own LF view and diff, and equals a plain string replacement
// when the match is exact and the file has no CR.
func FuzzApplyEdits(f *testing.F) {
	f.Add("Hello, world!\n", "world", "testing", "", "", false)
	f.Add("a\r\nb\nc\r\n", "b\nc", "x\ny", "", "", false)
	f.Add("\uFEFFone\r\ntwo\r\n", "one", "1", "two", "2\n3", true)
	f.Add("say \u201Chi\u201D  \nkeep  \n", `say "hi"`, "bye", "", "", false)
	f.Add("a\rb\nc", "b", "\nB\n", "", "", false)
	f.Add("x = \u2018a\u2019, y = \u2018b\u2019\n", "x = 'a'", "X", "y = 'b'", "Y", true)
	f.Add("foo foo\n", "foo", "bar", "", "", false)
	f.Add("one two three\n", "two three", "x", "one two", "y", true)
	f.Add("\x00\xff bin\nkey=1\n", "key=1", "key=2", "", "", false)
	f.Add("l1  \nl2 \u2013 x  \nl3\n", "l2 - x\nl3\n", "joined", "", "", false)

	f.Fuzz(func(t *testing.T, content, old1, new1, old2, new2 string, multi bool) {
		if len(content) > 1<<16 {
			return
		}
		// Edits arrive as JSON, which carries only valid UTF-8.
		valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		edits := []editSpec{{OldText: valid(old1), NewText: valid(new1)}}
		if multi {
			edits = append(edits, editSpec{OldText: valid(old2), NewText: valid(new2)})
		}

		// The pure core first.
		body, hasBOM := strings.CutPrefix(content, utf8BOM)
		out, err := applyEdits(body, edits, "f.txt")
		if err == nil {
			checkEditOutcome(t, body, edits, out)
		}

		// Then the tool, which must agree with the core.
		ws := newFakeWorkspace(t)
		ws.addFile("f.txt", content)
		tb := New(ws, Options{})
		r := tb.Call(context.Background(), "edit", []byte(editArgs(t, "f.txt", pairsOf(edits)...)), nil)
		got, _ := ws.content("f.txt")
		if r.IsError {
			if err == nil {
				t.Fatalf("tool failed (%s) where applyEdits succeeded", r.Content[0].Text)
			}
			if got != content {
				t.Fatalf("failed edit changed the file: %q -> %q", content, got)
			}
			for _, c := range ws.callLog() {
				if strings.HasPrefix(c, "WriteFile") {
					t.Fatalf("failed edit wrote: %v", ws.callLog())
				}
			}
			return
		}
		if err != nil {
			t.Fatalf("tool succeeded where applyEdits failed with %v", err)
		}
		want := out.content
		if hasBOM {
			want = utf8BOM + want
		}
		if got != want {
			t.Fatalf("file %q, want %q", got, want)
		}
	})
}

func pairsOf(edits []editSpec) []string {
	var p []string
	for _, e := range edits {
		p = append(p, e.OldText, e.NewText)
	}
	return p
}

func checkEditOutcome(t *testing.T, content string, edits []editSpec, out editOutcome) {
	t.Helper()
	if out.oldLF != normalizeLF(content) {
		t.Fatalf("oldLF %q is not the LF form of %q", out.oldLF, content)
	}
	if normalizeLF(out.content) != out.newLF {
		t.Fatalf("written text %q does not read back as its LF view %q", out.content, out.newLF)
	}
	if out.newLF == out.oldLF {
		t.Fatalf("success without a change")
	}
	for _, e := range edits {
		if !strings.Contains(out.newLF, normalizeLF(e.NewText)) {
			t.Fatalf("result %q lacks newText %q", out.newLF, e.NewText)
		}
	}
	checkOps(t, out.oldLF, out.newLF, out.ops)
	patched, err := applyUnifiedPatch(out.oldLF, unifiedPatch("f.txt", out.ops))
	if err != nil || patched != out.newLF {
		t.Fatalf("patch does not reproduce the result: %v", err)
	}
	if diff, first := displayDiff(out.oldLF, out.newLF, out.ops); diff == "" || first < 1 {
		t.Fatalf("empty display diff %q / first line %d", diff, first)
	}

	// The original bytes between replacements survive, in order: the text
	// before the first one and after the last exactly at the ends.
	idx := indexEndings(content)
	cursor, prev := 0, 0
	for i, r := range out.reps {
		gap := content[idx.toText(prev):idx.toText(r.start)]
		if i == 0 {
			if !strings.HasPrefix(out.content, gap) {
				t.Fatalf("prefix %q not kept in %q", gap, out.content)
			}
		}
		at := strings.Index(out.content[cursor:], gap)
		if at < 0 {
			t.Fatalf("untouched %q lost from %q", gap, out.content)
		}
		cursor += at + len(gap)
		prev = r.end
	}
	if tail := content[idx.toText(prev):]; !strings.HasSuffix(out.content[cursor:], tail) {
		t.Fatalf("suffix %q not kept in %q", tail, out.content)
	}

	// An exact single edit of a CR-free file is a plain replacement.
	if len(edits) == 1 && !strings.Contains(content+edits[0].OldText+edits[0].NewText, "\r") &&
		strings.Count(content, edits[0].OldText) == 1 {
		if want := strings.Replace(content, edits[0].OldText, edits[0].NewText, 1); out.content != want {
			t.Fatalf("exact edit gave %q, want %q", out.content, want)
		}
	}
}
