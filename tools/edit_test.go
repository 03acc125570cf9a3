package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// editArgs renders an edit call's arguments: pairs of oldText, newText.
func editArgs(t *testing.T, path string, pairs ...string) string {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatal("editArgs needs oldText/newText pairs")
	}
	edits := []map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		edits = append(edits, map[string]string{"oldText": pairs[i], "newText": pairs[i+1]})
	}
	b, err := json.Marshal(map[string]any{"path": path, "edits": edits})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// editFile creates path with content in a fresh fake workspace and runs one
// edit call on it.
func editFile(t *testing.T, path, content string, pairs ...string) (Result, *fakeWorkspace) {
	t.Helper()
	ws := newFakeWorkspace(t)
	ws.addFile(path, content)
	return call(t, newTestToolbox(t, ws), "edit", editArgs(t, path, pairs...)), ws
}

// wantFile asserts a file's exact content.
func wantFile(t *testing.T, ws *fakeWorkspace, path, want string) {
	t.Helper()
	got, ok := ws.content(path)
	if !ok {
		t.Fatalf("%s does not exist", path)
	}
	if got != want {
		t.Errorf("%s =\n%q\nwant\n%q", path, got, want)
	}
}

func editDetails(t *testing.T, r Result) EditDetails {
	t.Helper()
	d, ok := r.Details.(EditDetails)
	if !ok {
		t.Fatalf("details are %T, want EditDetails (result %+v)", r.Details, r)
	}
	return d
}

// wantPatchApplies checks that details.patch turns the old LF text into
// the new one.
func wantPatchApplies(t *testing.T, r Result, oldLF, newLF string) {
	t.Helper()
	got, err := applyUnifiedPatch(oldLF, editDetails(t, r).Patch)
	if err != nil {
		t.Fatalf("patch does not apply: %v\n%s", err, editDetails(t, r).Patch)
	}
	if got != newLF {
		t.Errorf("patched text %q, want %q", got, newLF)
	}
}

func TestEditReplace(t *testing.T) {
	r, ws := editFile(t, "test.txt", "Hello, world!\n", "world", "testing")
	wantText(t, r, false, "Successfully replaced 1 block(s) in test.txt.")
	wantFile(t, ws, "test.txt", "Hello, testing!\n")
	d := editDetails(t, r)
	if d.Diff != "-1 Hello, world!\n+1 Hello, testing!" {
		t.Errorf("diff = %q", d.Diff)
	}
	if d.Patch != "--- test.txt\n+++ test.txt\n@@ -1,1 +1,1 @@\n-Hello, world!\n+Hello, testing!\n" {
		t.Errorf("patch = %q", d.Patch)
	}
	if d.FirstChangedLine != 1 {
		t.Errorf("firstChangedLine = %d", d.FirstChangedLine)
	}
	b, err := json.Marshal(r.Details)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil || len(keys) != 3 || keys["firstChangedLine"] != 1.0 {
		t.Errorf("details JSON = %s", b)
	}
}

func TestEditErrors(t *testing.T) {
	const path = "test.txt"
	cases := []struct {
		name    string
		content string
		pairs   []string
		want    string
	}{
		{"not found", "Hello, world!\n", []string{"nonexistent", "x"},
			"Could not find the exact text in test.txt. The old text must match exactly including all whitespace and newlines."},
		{"occurrences", "foo foo foo\n", []string{"foo", "bar"},
			"Found 3 occurrences of the text in test.txt. The text must be unique. Please provide more context to make it unique."},
		{"empty oldText", "abc\n", []string{"", "x"},
			"oldText must not be empty in test.txt."},
		{"no change", "abc\n", []string{"abc", "abc"},
			"No changes made to test.txt. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."},
		{"multi empty", "abc\n", []string{"a", "x", "", "y"},
			"edits[1].oldText must not be empty in test.txt."},
		{"multi not found", "abc\n", []string{"a", "x", "zzz", "y"},
			"Could not find edits[1] in test.txt. The oldText must match exactly including all whitespace and newlines."},
		{"multi occurrences", "a b b\n", []string{"a", "x", "b", "y"},
			"Found 2 occurrences of edits[1] in test.txt. Each oldText must be unique. Please provide more context to make it unique."},
		{"multi overlap", "one two three\n", []string{"two three", "x", "one two", "y"},
			"edits[1] and edits[0] overlap in test.txt. Merge them into one edit or target disjoint regions."},
		{"multi no change", "a b\n", []string{"a", "a", "b", "b"},
			"No changes made to test.txt. The replacements produced identical content."},
		{"empty checked before matching", "abc\n", []string{"zzz", "x", "", "y"},
			"edits[1].oldText must not be empty in test.txt."},
		{"first failing edit reported", "abc\n", []string{"q", "x", "zzz", "y"},
			"Could not find edits[0] in test.txt. The oldText must match exactly including all whitespace and newlines."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ws := editFile(t, path, c.content, c.pairs...)
			wantText(t, r, true, c.want)
			wantFile(t, ws, path, c.content)
			for _, call := range ws.callLog() {
				if strings.HasPrefix(call, "WriteFile") {
					t.Errorf("failed edit wrote: %v", ws.callLog())
				}
			}
		})
	}
}

func TestEditEmptyEdits(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("a.txt", "x\n")
	r := call(t, newTestToolbox(t, ws), "edit", `{"path":"a.txt","edits":[]}`)
	wantText(t, r, true, "Edit tool input is invalid. edits must contain at least one replacement.")
	if len(ws.callLog()) != 0 {
		t.Errorf("invalid input touched the workspace: %v", ws.callLog())
	}
}

func TestEditAccessErrors(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("ro.txt", "x\n")
	ws.setMode("ro.txt", 0o444)
	ws.addFile("broken.txt", "x\n")
	ws.failOn("Access", "broken.txt", errors.New("disk offline"))
	ws.addFile("wrapped.txt", "x\n")
	ws.failOn("Access", "wrapped.txt", opsapi.E("client.Access", "/w/wrapped.txt", nil, fmt.Errorf("rpc: %w", errors.New("broker unreachable"))))
	tb := newTestToolbox(t, ws)

	wantText(t, call(t, tb, "edit", editArgs(t, "/w/missing.txt", "a", "b")), true,
		"Could not edit file: /w/missing.txt. Error code: ENOENT.")
	wantText(t, call(t, tb, "edit", editArgs(t, "/w/ro.txt", "x", "y")), true,
		"Could not edit file: /w/ro.txt. Error code: EACCES.")
	wantFile(t, ws, "ro.txt", "x\n")
	wantText(t, call(t, tb, "edit", editArgs(t, "broken.txt", "x", "y")), true,
		"Could not edit file: broken.txt. Error: disk offline.")
	wantText(t, call(t, tb, "edit", editArgs(t, "wrapped.txt", "x", "y")), true,
		"Could not edit file: wrapped.txt. Error: broker unreachable.")
	// The path is resolved against the workspace; messages keep the raw one.
	wantText(t, call(t, tb, "edit", editArgs(t, "@~/missing.txt", "a", "b")), true,
		"Could not edit file: @~/missing.txt. Error code: ENOENT.")
}

func TestEditReadAndWriteErrors(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addDir("dir")
	ws.addFile("f.txt", "abc\n")
	ws.failOn("WriteFile", "f.txt", opsapi.E("fake.WriteFile", "/w/f.txt", opsapi.ErrPermission, nil))
	ws.addFile("g.txt", "abc\n")
	ws.failOn("Open", "g.txt", errors.New("stream reset"))
	tb := newTestToolbox(t, ws)
	wantText(t, call(t, tb, "edit", editArgs(t, "dir", "a", "b")), true,
		"EISDIR: illegal operation on a directory, read")
	wantText(t, call(t, tb, "edit", editArgs(t, "f.txt", "abc", "x")), true,
		"EACCES: permission denied, open '/w/f.txt'")
	wantFile(t, ws, "f.txt", "abc\n")
	wantText(t, call(t, tb, "edit", editArgs(t, "g.txt", "abc", "x")), true, "stream reset")
}

func TestEditTooLarge(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("big.txt", "needle\n"+strings.Repeat("x", maxEditFileBytes))
	r := call(t, newTestToolbox(t, ws), "edit", editArgs(t, "big.txt", "needle", "pin"))
	wantText(t, r, true, "Could not edit file: big.txt. The file is larger than 64.0MB, the most the edit tool reads; use bash (e.g. sed) to change it.")
	for _, c := range ws.callLog() {
		if strings.HasPrefix(c, "WriteFile") {
			t.Fatal("too large file written")
		}
	}
}

func TestEditAborted(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("a.txt", "abc\n")
	tb := newTestToolbox(t, ws)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantText(t, tb.Call(ctx, "edit", json.RawMessage(editArgs(t, "a.txt", "abc", "x")), nil), true, "Operation aborted")

	// Cancelled while reading: nothing is written.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	ws.hook = func(op, p string) {
		if op == "Open" {
			cancel()
		}
	}
	wantText(t, tb.Call(ctx, "edit", json.RawMessage(editArgs(t, "a.txt", "abc", "x")), nil), true, "Operation aborted")
	wantFile(t, ws, "a.txt", "abc\n")
}

func TestEditTwoDisjointEdits(t *testing.T) {
	r, ws := editFile(t, "multi.txt", "alpha\nbeta\ngamma\ndelta\n", "alpha", "ALPHA", "gamma", "GAMMA")
	wantText(t, r, false, "Successfully replaced 2 block(s) in multi.txt.")
	wantFile(t, ws, "multi.txt", "ALPHA\nbeta\nGAMMA\ndelta\n")
	wantPatchApplies(t, r, "alpha\nbeta\ngamma\ndelta\n", "ALPHA\nbeta\nGAMMA\ndelta\n")
}

func TestEditMatchedAgainstOriginal(t *testing.T) {
	// The second edit's oldText would match inside the first one's result
	// if edits were applied one after another.
	r, ws := editFile(t, "o.txt", "foo\nbar\nbaz\n", "foo\n", "foo bar\n", "bar\n", "BAR\n")
	wantText(t, r, false, "Successfully replaced 2 block(s) in o.txt.")
	wantFile(t, ws, "o.txt", "foo bar\nBAR\nbaz\n")
}

func TestEditLargeFileDiffIsCompact(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 600; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	old := b.String()
	r, ws := editFile(t, "big.txt", old,
		"line 100\n", "line one hundred\n",
		"line 300\n", "line three hundred\n",
		"line 500\n", "line five hundred\n")
	wantText(t, r, false, "Successfully replaced 3 block(s) in big.txt.")
	d := editDetails(t, r)
	if !strings.Contains(d.Diff, "...") {
		t.Errorf("diff has no elision:\n%s", d.Diff)
	}
	if n := len(strings.Split(d.Diff, "\n")); n >= 50 {
		t.Errorf("diff has %d lines, want < 50:\n%s", n, d.Diff)
	}
	for _, far := range []string{"line 1\n", "line 200", "line 400", "line 600"} {
		if strings.Contains(d.Diff+"\n", far) {
			t.Errorf("diff shows far context %q", far)
		}
	}
	for _, near := range []string{" 96 line 96", "-100 line 100", "+100 line one hundred", " 104 line 104", "+500 line five hundred"} {
		if !strings.Contains(d.Diff, near) {
			t.Errorf("diff lacks %q:\n%s", near, d.Diff)
		}
	}
	if d.FirstChangedLine != 100 {
		t.Errorf("firstChangedLine = %d, want 100", d.FirstChangedLine)
	}
	newText, _ := ws.content("big.txt")
	wantPatchApplies(t, r, old, newText)
	if strings.Count(d.Patch, "@@ -") != 3 {
		t.Errorf("want 3 hunks:\n%s", d.Patch)
	}
}

func TestEditFuzzy(t *testing.T) {
	cases := []struct {
		name, content, oldText, newText, want string
	}{
		{"trailing whitespace", "line one   \nline two  \nline three\n", "line one\nline two\n", "replaced\n",
			"replaced\nline three\n"},
		{"full-width punctuation", "说明：使用（测试）\n其他\n", "说明:使用(测试)", "done",
			"done\n其他\n"},
		{"nfkc full-width letters", "const ＡＢＣ１２３ = 1;\n", "const ABC123 = 1;", "const x = 1;",
			"const x = 1;\n"},
		{"nfkc decomposed accent", "let s = \"cafe\u0301\";\n", "let s = \"caf\u00e9\";", "let s = \"tea\";",
			"let s = \"tea\";\n"},
		{"smart single quotes", "console.log(\u2018hello\u2019);\n", "console.log('hello');", "console.log('bye');",
			"console.log('bye');\n"},
		{"smart double quotes", "say \u201Chi\u201D\n", `say "hi"`, `say "bye"`,
			"say \"bye\"\n"},
		{"dashes", "range 1\u20132 \u2014 done\n", "range 1-2 - done", "range 3-4",
			"range 3-4\n"},
		{"nbsp", "hello\u00A0world\n", "hello world", "hi world",
			"hi world\n"},
		// Only the touched line is rewritten from the fuzzy view: its own
		// trailing spaces go, every other line keeps them.
		{"untouched lines keep trailing spaces", "keep   \nfix \u201Cme\u201D  \nkeep too \t\n", `fix "me"`, `fixed "me"`,
			"keep   \nfixed \"me\"\nkeep too \t\n"},
		// The rest of a touched line comes from the fuzzy view too.
		{"touched line normalized whole", "a = \u2018x\u2019; b = \u2018y\u2019;\n", "a = 'x';", "a = 'z';",
			"a = 'z'; b = 'y';\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ws := editFile(t, "f.txt", c.content, c.oldText, c.newText)
			wantText(t, r, false, "Successfully replaced 1 block(s) in f.txt.")
			wantFile(t, ws, "f.txt", c.want)
			wantPatchApplies(t, r, c.content, c.want)
		})
	}
}

func TestEditFuzzyExactPreferred(t *testing.T) {
	content := "const a = 'x';\nconst b = \u2018y\u2019;   \n"
	r, ws := editFile(t, "f.txt", content, "const a = 'x';", "const a = 'z';")
	wantText(t, r, false, "Successfully replaced 1 block(s) in f.txt.")
	// Exact: nothing but the match changes, not even line 2's quotes or spaces.
	wantFile(t, ws, "f.txt", "const a = 'z';\nconst b = \u2018y\u2019;   \n")
}

func TestEditFuzzyFailures(t *testing.T) {
	r, ws := editFile(t, "f.txt", "say \u201Chi\u201D\n", `say "bye"`, "x")
	wantText(t, r, true, "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines.")
	wantFile(t, ws, "f.txt", "say \u201Chi\u201D\n")

	// Duplicates are counted after normalization, even for an exact match.
	r, ws = editFile(t, "f.txt", "it\u2019s here\nit's here\n", "it's here", "x")
	wantText(t, r, true, "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique.")
	wantFile(t, ws, "f.txt", "it\u2019s here\nit's here\n")
}

func TestEditFuzzyMultiEdit(t *testing.T) {
	content := "exact line  \nsmart \u201Cquote\u201D\nmiddle   \nlast\n"
	r, ws := editFile(t, "f.txt", content, "exact line", "EXACT", `smart "quote"`, "SMART")
	wantText(t, r, false, "Successfully replaced 2 block(s) in f.txt.")
	// Both are matched in fuzzy space; the first edit's line loses its
	// trailing spaces (it is touched), "middle   " keeps them.
	want := "EXACT\nSMART\nmiddle   \nlast\n"
	wantFile(t, ws, "f.txt", want)
	wantPatchApplies(t, r, content, want)
}

func TestEditFuzzySameLineEdits(t *testing.T) {
	content := "a = \u2018x\u2019, b = \u2018y\u2019   \nnext  \n"
	r, ws := editFile(t, "f.txt", content, "a = 'x'", "A", "b = 'y'", "B")
	wantText(t, r, false, "Successfully replaced 2 block(s) in f.txt.")
	wantFile(t, ws, "f.txt", "A, B\nnext  \n")
}

func TestEditFuzzyAcrossLinesConsumingNewline(t *testing.T) {
	content := "head  \none \u2013 two  \nthree  \ntail  \n"
	r, ws := editFile(t, "f.txt", content, "one - two\nthree\n", "joined ")
	wantText(t, r, false, "Successfully replaced 1 block(s) in f.txt.")
	want := "head  \njoined tail  \n"
	wantFile(t, ws, "f.txt", want)
	wantPatchApplies(t, r, content, want)
}

func TestEditLineEndings(t *testing.T) {
	cases := []struct {
		name, content string
		pairs         []string
		want          string
	}{
		{"LF oldText matches CRLF file", "first\r\nsecond\r\nthird\r\n", []string{"first\nsecond", "first\nREPLACED"},
			"first\r\nREPLACED\r\nthird\r\n"},
		{"CRLF preserved", "first\r\nsecond\r\nthird\r\n", []string{"second", "REPLACED"},
			"first\r\nREPLACED\r\nthird\r\n"},
		{"CRLF oldText on CRLF file", "first\r\nsecond\r\n", []string{"first\r\nsecond", "1\r\n2"},
			"1\r\n2\r\n"},
		{"LF preserved", "first\nsecond\nthird\n", []string{"second", "REPLACED\nMORE"},
			"first\nREPLACED\nMORE\nthird\n"},
		{"mixed endings kept per line", "a\r\nb\nc\r\nd\n", []string{"c", "C1\nC2"},
			"a\r\nb\nC1\r\nC2\r\nd\n"},
		{"inserted newlines take the start line's ending", "a\r\nb\nc\n", []string{"a\r\nb", "x\ny\nz"},
			"x\r\ny\r\nz\nc\n"},
		{"last line without ending uses the previous one's", "a\r\nb", []string{"b", "b1\nb2"},
			"a\r\nb1\r\nb2"},
		{"lone CR endings", "a\rb\rc", []string{"b", "B\nB"},
			"a\rB\rB\rc"},
		{"deleting a whole CRLF line", "a\r\nb\r\nc\r\n", []string{"b\n", ""},
			"a\r\nc\r\n"},
		{"BOM preserved", "\uFEFFfirst\nsecond\n", []string{"first", "FIRST"},
			"\uFEFFFIRST\nsecond\n"},
		{"BOM not part of the match", "\uFEFFabc\n", []string{"abc", "x"},
			"\uFEFFx\n"},
		{"BOM and CRLF multi-edit", "\uFEFFone\r\ntwo\r\nthree\r\n", []string{"one", "ONE", "three", "THREE\nFOUR"},
			"\uFEFFONE\r\ntwo\r\nTHREE\r\nFOUR\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ws := editFile(t, "f.txt", c.content, c.pairs...)
			wantText(t, r, false, fmt.Sprintf("Successfully replaced %d block(s) in f.txt.", len(c.pairs)/2))
			wantFile(t, ws, "f.txt", c.want)
			// The diff and patch are over LF text, without the BOM.
			oldLF := normalizeLF(strings.TrimPrefix(c.content, utf8BOM))
			newLF := normalizeLF(strings.TrimPrefix(c.want, utf8BOM))
			wantPatchApplies(t, r, oldLF, newLF)
			if d := editDetails(t, r); strings.Contains(d.Diff+d.Patch, "\r") || strings.Contains(d.Diff+d.Patch, utf8BOM) {
				t.Errorf("diff or patch carries CR or BOM: %q %q", d.Diff, d.Patch)
			}
		})
	}
}

func TestEditLineEndingDuplicates(t *testing.T) {
	r, ws := editFile(t, "f.txt", "a\r\nb\na\nb\r\n", "a\nb", "x")
	wantText(t, r, true, "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique.")
	wantFile(t, ws, "f.txt", "a\r\nb\na\nb\r\n")
}

func TestEditBinaryBytesPreserved(t *testing.T) {
	content := "\x00\xff\xfe bin\nkey=old\n\x80\x81\r\n"
	r, ws := editFile(t, "f.bin", content, "key=old", "key=new")
	wantText(t, r, false, "Successfully replaced 1 block(s) in f.bin.")
	wantFile(t, ws, "f.bin", "\x00\xff\xfe bin\nkey=new\n\x80\x81\r\n")
}

func TestEditPrepareArguments(t *testing.T) {
	tool := newEditTool(nil, nil).(*editTool)
	obj := func(o, n string) map[string]any { return map[string]any{"oldText": o, "newText": n} }
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"legacy fold", map[string]any{"path": "a", "oldText": "x", "newText": "y"},
			map[string]any{"path": "a", "edits": []any{obj("x", "y")}}},
		{"legacy appended to edits", map[string]any{"path": "a", "edits": []any{obj("1", "2")}, "oldText": "x", "newText": "y"},
			map[string]any{"path": "a", "edits": []any{obj("1", "2"), obj("x", "y")}}},
		{"legacy with a non-string passes through", map[string]any{"path": "a", "oldText": "x", "newText": 5.0},
			map[string]any{"path": "a", "oldText": "x", "newText": 5.0}},
		{"edits as JSON string", map[string]any{"path": "a", "edits": `[{"oldText":"x","newText":"y"}]`},
			map[string]any{"path": "a", "edits": []any{obj("x", "y")}}},
		{"edits as JSON string of one object", map[string]any{"path": "a", "edits": `{"oldText":"x","newText":"y"}`},
			map[string]any{"path": "a", "edits": []any{obj("x", "y")}}},
		{"edits as invalid JSON left alone", map[string]any{"path": "a", "edits": `[{"oldText":`},
			map[string]any{"path": "a", "edits": `[{"oldText":`}},
		{"edits as JSON string of a number left alone", map[string]any{"path": "a", "edits": `5`},
			map[string]any{"path": "a", "edits": `5`}},
		{"edits as one object", map[string]any{"path": "a", "edits": obj("x", "y")},
			map[string]any{"path": "a", "edits": []any{obj("x", "y")}}},
		{"JSON string and legacy", map[string]any{"path": "a", "edits": `[{"oldText":"1","newText":"2"}]`, "oldText": "x", "newText": "y"},
			map[string]any{"path": "a", "edits": []any{obj("1", "2"), obj("x", "y")}}},
		{"nil", nil, nil},
		{"string", "edit", "edit"},
		{"number", 5.0, 5.0},
		{"array", []any{1.0}, []any{1.0}},
	}
	for _, c := range cases {
		if got := tool.PrepareArguments(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, got, c.want)
		}
	}

	// Valid input is returned as the same map, untouched.
	valid := map[string]any{"path": "a", "edits": []any{obj("x", "y")}}
	got := tool.PrepareArguments(valid)
	if m, ok := got.(map[string]any); !ok || reflect.ValueOf(m).Pointer() != reflect.ValueOf(valid).Pointer() {
		t.Errorf("valid input not returned by identity: %#v", got)
	}
	// Repaired input is a copy: the caller's map is not changed.
	legacy := map[string]any{"path": "a", "oldText": "x", "newText": "y"}
	tool.PrepareArguments(legacy)
	if _, ok := legacy["oldText"]; !ok || legacy["edits"] != nil {
		t.Errorf("caller's map modified: %#v", legacy)
	}
}

func TestEditSchemaHasNoLegacyFields(t *testing.T) {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(definitionOf("edit").Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if _, ok := schema.Properties["oldText"]; ok {
		t.Error("schema has top-level oldText")
	}
	if _, ok := schema.Properties["newText"]; ok {
		t.Error("schema has top-level newText")
	}
	if !reflect.DeepEqual(schema.Required, []string{"path", "edits"}) {
		t.Errorf("required = %v", schema.Required)
	}
}

func TestEditLegacyInputExecutes(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("legacy.txt", "before\n")
	tb := newTestToolbox(t, ws)
	r := call(t, tb, "edit", `{"path":"legacy.txt","oldText":"before","newText":"after"}`)
	if !reflect.DeepEqual(r.Content, []Content{{Type: "text", Text: "Successfully replaced 1 block(s) in legacy.txt."}}) || r.IsError {
		t.Fatalf("result %+v", r)
	}
	wantFile(t, ws, "legacy.txt", "after\n")

	r = call(t, tb, "edit", `{"path":"legacy.txt","edits":"[{\"oldText\":\"after\",\"newText\":\"again\"}]"}`)
	wantText(t, r, false, "Successfully replaced 1 block(s) in legacy.txt.")
	wantFile(t, ws, "legacy.txt", "again\n")

	r = call(t, tb, "edit", `{"path":"legacy.txt","edits":{"oldText":"again","newText":"once more"}}`)
	wantText(t, r, false, "Successfully replaced 1 block(s) in legacy.txt.")
	wantFile(t, ws, "legacy.txt", "once more\n")
}

// TestEditParallelEditsBothApplied: two edits of one file issued at once
// are serialized by the mutation queue, so neither overwrites the other.
// The first write is held back long enough that, without the queue, the
// other edit would read the old content and one change would be lost.
func TestEditParallelEditsBothApplied(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("p.txt", "alpha\nbeta\n")
	var writes atomic.Int32
	var inside sync.WaitGroup
	ws.hook = func(op, p string) {
		if op == "WriteFile" && writes.Add(1) == 1 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	tb := newTestToolbox(t, ws)
	results := make([]Result, 2)
	args := []string{editArgs(t, "p.txt", "alpha", "ALPHA"), editArgs(t, "p.txt", "beta", "BETA")}
	for i := range args {
		inside.Add(1)
		go func() {
			defer inside.Done()
			results[i] = call(t, tb, "edit", args[i])
		}()
	}
	inside.Wait()
	for _, r := range results {
		wantText(t, r, false, "Successfully replaced 1 block(s) in p.txt.")
	}
	wantFile(t, ws, "p.txt", "ALPHA\nBETA\n")
}

// TestEditThenWriteWriteWins: a write issued after an edit of the same
// file waits for it, so the file ends with the write's content.
func TestEditThenWriteWriteWins(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("w.txt", "original\n")
	editReading := make(chan struct{})
	release := make(chan struct{})
	ws.hook = func(op, p string) {
		if op == "Open" {
			close(editReading)
			<-release
		}
	}
	tb := newTestToolbox(t, ws)
	editDone := make(chan Result)
	go func() { editDone <- call(t, tb, "edit", editArgs(t, "w.txt", "original", "edited")) }()
	<-editReading
	writeDone := make(chan Result)
	go func() { writeDone <- call(t, tb, "write", `{"path":"w.txt","content":"written\n"}`) }()
	select {
	case r := <-writeDone:
		t.Fatalf("write finished while the edit held the file: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	wantText(t, <-editDone, false, "Successfully replaced 1 block(s) in w.txt.")
	if r := <-writeDone; r.IsError {
		t.Fatalf("write failed: %+v", r)
	}
	wantFile(t, ws, "w.txt", "written\n")
}

func TestEditSymlinkAliasesShareContent(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("real.txt", "x\n")
	ws.addSymlink("alias.txt", "real.txt")
	r := call(t, newTestToolbox(t, ws), "edit", editArgs(t, "alias.txt", "x", "y"))
	wantText(t, r, false, "Successfully replaced 1 block(s) in alias.txt.")
	wantFile(t, ws, "real.txt", "y\n")
}

func TestEditApplyEditsPure(t *testing.T) {
	// applyEdits keeps bytes it does not touch, even invalid UTF-8, and its
	// LF views agree with the written text.
	content := "\xffkeep\r\nchange me\r\n\xfe\n"
	out, err := applyEdits(content, []editSpec{{OldText: "change me", NewText: "changed\nagain"}}, "p")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\xffkeep\r\nchanged\r\nagain\r\n\xfe\n"; out.content != want {
		t.Errorf("content %q, want %q", out.content, want)
	}
	if normalizeLF(out.content) != out.newLF || out.oldLF != normalizeLF(content) {
		t.Error("LF views disagree with the texts")
	}
	if !bytes.Contains([]byte(out.content), []byte("\xffkeep")) {
		t.Error("invalid UTF-8 lost")
	}
}

func TestEditReplacementsChange(t *testing.T) {
	// "aa"->"a" plus "b"->"ab" rebuilds "aab": no change although both
	// replacements differ from what they replace.
	if replacementsChange("aab", []lfReplacement{{0, 2, "a"}, {2, 3, "ab"}}) {
		t.Error(`"aab" reported changed`)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 5000; i++ {
		s := randomText(r, 6)
		var reps []lfReplacement
		for pos := 0; pos < len(s) && len(reps) < 3; {
			start := pos + r.IntN(len(s)-pos)
			end := start + 1 + r.IntN(min(3, len(s)-start))
			text := s[start:end]
			if r.IntN(2) == 0 {
				text = randomText(r, 1)
			}
			reps = append(reps, lfReplacement{start, end, text})
			pos = end
		}
		if got, want := replacementsChange(s, reps), applyReplacements(s, reps) != s; got != want {
			t.Fatalf("replacementsChange(%q, %+v) = %v, want %v", s, reps, got, want)
		}
	}
}
