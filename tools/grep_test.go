package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

func TestGrep(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("example.txt", "first line\nmatch line\nlast line\n")
	r := call(t, tb, "grep", `{"pattern":"match","path":"example.txt"}`)
	wantText(t, r, false, "example.txt:2: match line")
	if r.Details != nil {
		t.Errorf("details = %#v", r.Details)
	}
	f.addFile("context.txt", "before\nmatch one\nafter\nmatch two\nend\n")
	r = call(t, tb, "grep", `{"pattern":"match","path":"context.txt","limit":1,"context":1}`)
	wantText(t, r, false, "context.txt-1- before\ncontext.txt:2: match one\ncontext.txt-3- after\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]")
	if d := r.Details.(grepDetails); d.MatchLimitReached != 1 {
		t.Errorf("details = %#v", d)
	}
	wantText(t, call(t, tb, "grep", `{"pattern":"--pre=/bin/sh"}`), false, "No matches found")
	wantText(t, call(t, tb, "grep", `{"pattern":"x","path":"missing"}`), true, "Path not found: /w/missing")
	wantText(t, call(t, tb, "grep", `{"pattern":"(unclosed"}`), true,
		"regex parse error: error parsing regexp: missing closing ): `(unclosed`")

	f.addFile("sub/dir/a.go", "package a // MATCH\r\nold mac\rline\n")
	wantText(t, call(t, tb, "grep", `{"pattern":"match","path":"sub","ignoreCase":true}`), false, "dir/a.go:1: package a // MATCH")
	wantText(t, call(t, tb, "grep", `{"pattern":"mac","path":"sub","glob":"./*.go"}`), false, "dir/a.go:2: old macline")
	wantText(t, call(t, tb, "grep", `{"pattern":"a.","path":"sub","literal":true}`), false, "No matches found")
}

func TestGrepLongLinesAndBytes(t *testing.T) {
	f := newFakeWorkspace(t)
	tb := newTestToolbox(t, f)
	f.addFile("long.txt", "hit "+strings.Repeat("é", 600)+"\n")
	r := call(t, tb, "grep", `{"pattern":"hit"}`)
	wantText(t, r, false, "long.txt:1: hit "+strings.Repeat("é", 496)+"... [truncated]\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]")
	if d := r.Details.(grepDetails); !d.LinesTruncated {
		t.Errorf("details = %#v", d)
	}

	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("hit %03d %s", i, strings.Repeat("z", 300)))
	}
	f.addFile("many.txt", strings.Join(lines, "\n"))
	r = call(t, tb, "grep", `{"pattern":"hit \\d","path":"many.txt","limit":250}`)
	got := text(t, r)
	if !strings.HasSuffix(got, "\n\n[250 matches limit reached. Use limit=500 for more, or refine pattern. 50.0KB limit reached]") {
		t.Errorf("notices: ...%q", got[len(got)-100:])
	}
	d := r.Details.(grepDetails)
	if d.Truncation == nil || d.Truncation.OutputBytes > DefaultMaxBytes || d.MatchLimitReached != 250 {
		t.Errorf("details = %+v", d)
	}
}

// canned serves a fixed search result, to check formatting of what a real
// engine reports (context lines, CR handling, a limit the engine ignored).
type canned struct {
	*fakeWorkspace
	res opsapi.SearchResult
	req *opsapi.SearchRequest
}

func (c canned) Search(_ context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	*c.req = req
	return c.res, nil
}

func TestGrepFormatsEngineLines(t *testing.T) {
	f := newFakeWorkspace(t)
	f.addDir("d")
	var req opsapi.SearchRequest
	c := canned{fakeWorkspace: f, req: &req, res: opsapi.SearchResult{Lines: []opsapi.SearchLine{
		{Path: "a.txt", Line: 1, Text: "ctx\r"},
		{Path: "a.txt", Line: 2, Text: "hit\r\n", Match: true},
		{Path: "b.txt", Line: 7, Text: "hit two", Match: true},
		{Path: "b.txt", Line: 8, Text: "hit three", Match: true},
	}}}
	tb := newTestToolbox(t, c)
	r := call(t, tb, "grep", `{"pattern":"hit","path":"d","context":2.7,"limit":2}`)
	wantText(t, r, false, "a.txt-1- ctx\na.txt:2: hit\nb.txt:7: hit two\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]")
	if req.Path != "/w/d" || req.Context != 2 || req.Limit != 2 || req.Pattern != "hit" {
		t.Errorf("request = %+v", req)
	}
	call(t, tb, "grep", `{"pattern":"hit","path":"d","context":-3}`)
	if req.Context != 0 || req.Limit != 100 {
		t.Errorf("defaults: %+v", req)
	}
}
