package tools

import (
	"fmt"
	"strings"
	"testing"
)

func TestLs(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("b.txt", "")
	f.addFile("A.txt", "")
	f.addFile(".hidden-file", "")
	f.addDir(".hidden-dir")
	f.addFile("src/main.go", "")
	f.addFile("_under", "")
	f.addSymlink("dangling", "nowhere")
	f.addSymlink("linkdir", "src")
	r := call(t, tb, "ls", `{}`)
	// CLDR collation puts '_' before '.'.
	wantText(t, r, false, "_under\n.hidden-dir/\n.hidden-file\nA.txt\nb.txt\nlinkdir/\nsrc/")
	if r.Details != nil {
		t.Errorf("details = %#v", r.Details)
	}
	wantText(t, call(t, tb, "ls", `{"path":"src"}`), false, "main.go")

	wantText(t, call(t, tb, "ls", `{"path":"nope"}`), true, "Path not found: /w/nope")
	wantText(t, call(t, tb, "ls", `{"path":"b.txt"}`), true, "Not a directory: /w/b.txt")
	wantText(t, call(t, tb, "ls", `{"path":"/etc"}`), true, "Path not found: /etc")
	f.addDir("empty")
	wantText(t, call(t, tb, "ls", `{"path":"empty"}`), false, "(empty directory)")
	f.addDir("onlybroken")
	f.addSymlink("onlybroken/x", "/w/missing")
	wantText(t, call(t, tb, "ls", `{"path":"onlybroken"}`), false, "(empty directory)")
	f.addDir("locked")
	f.failOn("ReadDir", "locked", errnoErr("EACCES"))
	wantText(t, call(t, tb, "ls", `{"path":"locked"}`), true,
		"Cannot read directory: EACCES: permission denied, scandir '/w/locked'")
}

func TestLsSortIsCaseInsensitiveCollation(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	for _, n := range []string{"b", "B2", "a-b", "ab", "a_c", "Z", "é", "e", "f", "10", "9"} {
		f.addFile("s/"+n, "")
	}
	// ICU collation: punctuation before digits before letters; accents
	// are secondary (é sorts with e).
	wantText(t, call(t, tb, "ls", `{"path":"s"}`), false, "10\n9\na_c\na-b\nab\nb\nB2\ne\né\nf\nZ")
}

func TestLsLimits(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	for i := range 10 {
		f.addFile(fmt.Sprintf("d/f%d", i), "")
	}
	r := call(t, tb, "ls", `{"path":"d","limit":3.9}`)
	wantText(t, r, false, "f0\nf1\nf2\n\n[3 entries limit reached. Use limit=6 for more]")
	if d, ok := r.Details.(lsDetails); !ok || d.EntryLimitReached != 3 || d.Truncation != nil {
		t.Errorf("details = %#v", r.Details)
	}
	wantText(t, call(t, tb, "ls", `{"path":"d","limit":0}`), false, "f0\n\n[1 entries limit reached. Use limit=2 for more]")
	wantText(t, call(t, tb, "ls", `{"path":"d","limit":10}`), false, "f0\nf1\nf2\nf3\nf4\nf5\nf6\nf7\nf8\nf9")

	long := strings.Repeat("n", 200)
	for i := range 300 {
		f.addFile(fmt.Sprintf("big/%s%03d", long, i), "")
	}
	r = call(t, tb, "ls", `{"path":"big"}`)
	got := text(t, r)
	if !strings.HasSuffix(got, "\n\n[50.0KB limit reached]") {
		t.Errorf("no byte notice: ...%q", got[len(got)-60:])
	}
	if d := r.Details.(lsDetails); d.Truncation == nil || d.EntryLimitReached != 0 {
		t.Errorf("details = %#v", d)
	}
	r = call(t, tb, "ls", `{"path":"big","limit":299}`)
	if !strings.HasSuffix(text(t, r), "\n\n[299 entries limit reached. Use limit=598 for more. 50.0KB limit reached]") {
		t.Errorf("joined notices: ...%q", text(t, r)[len(text(t, r))-90:])
	}
}
