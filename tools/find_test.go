package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

func TestFind(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("src/foo/bar/example.spec.ts", "")
	f.addFile("src/a.ts", "")
	f.addFile(".secret/hidden.txt", "")
	f.addFile("node_modules/x/index.ts", "")
	f.addFile(".git/config.ts", "")
	r := call(t, tb, "find", `{"pattern":"*.ts"}`)
	wantText(t, r, false, "src/a.ts\nsrc/foo/bar/example.spec.ts")
	if r.Details != nil {
		t.Errorf("details = %#v", r.Details)
	}
	wantText(t, call(t, tb, "find", `{"pattern":"./src/**/*.spec.ts"}`), false, "src/foo/bar/example.spec.ts")
	wantText(t, call(t, tb, "find", `{"pattern":"*.ts","path":"src/foo"}`), false, "bar/example.spec.ts")
	wantText(t, call(t, tb, "find", `{"pattern":"hidden.txt"}`), false, ".secret/hidden.txt")
	wantText(t, call(t, tb, "find", `{"pattern":"--help"}`), false, "No files found matching pattern")
	wantText(t, call(t, tb, "find", `{"pattern":"*","path":"nope"}`), true, "Path not found: /w/nope")
	wantText(t, call(t, tb, "find", `{"pattern":"["}`), true, "error parsing glob '[': unclosed character class")

	// The request carries pi's ignores and the effective limit.
	var seen opsapi.GlobRequest
	rec := &recordingFind{fakeWorkspace: f, last: &seen}
	tb2 := newTestToolbox(t, rec)
	call(t, tb2, "find", `{"pattern":"x","limit":"7.5"}`)
	if seen.Limit != 7 || seen.Dir != "/w" || strings.Join(seen.Ignore, ",") != "**/node_modules/**,**/.git/**" {
		t.Errorf("request = %+v", seen)
	}
}

type recordingFind struct {
	*fakeWorkspace
	last *opsapi.GlobRequest
}

func (r *recordingFind) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	*r.last = req
	return r.fakeWorkspace.Glob(ctx, req)
}

func TestFindLimits(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	for i := range 5 {
		f.addFile(fmt.Sprintf("f%d.go", i), "")
	}
	r := call(t, tb, "find", `{"pattern":"*.go","limit":2}`)
	wantText(t, r, false, "f0.go\nf1.go\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]")
	if d := r.Details.(findDetails); d.ResultLimitReached != 2 || d.Truncation != nil {
		t.Errorf("details = %#v", d)
	}
	// Exactly limit results and no more: no notice.
	wantText(t, call(t, tb, "find", `{"pattern":"*.go","limit":5}`), false, "f0.go\nf1.go\nf2.go\nf3.go\nf4.go")

	long := strings.Repeat("p", 250)
	for i := range 300 {
		f.addFile(fmt.Sprintf("deep/%s%03d.md", long, i), "")
	}
	r = call(t, tb, "find", `{"pattern":"*.md"}`)
	got := text(t, r)
	if !strings.HasSuffix(got, "\n\n[50.0KB limit reached]") || r.Details.(findDetails).Truncation == nil {
		t.Errorf("byte truncation: ...%q", got[len(got)-50:])
	}
}
