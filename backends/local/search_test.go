package local_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

func fmtLines(ls []opsapi.SearchLine) string {
	var b strings.Builder
	for _, l := range ls {
		sep := "-"
		if l.Match {
			sep = ":"
		}
		fmt.Fprintf(&b, "%s%s%d%s %s\n", l.Path, sep, l.Line, sep, l.Text)
	}
	return b.String()
}

func TestSearch(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "rg")
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, `mkdir -p src/deep .hidden && printf 'one\nmatch here\nthree\n' > src/a.txt &&
printf 'MATCH upper\n' > src/deep/b.go && printf 'match hidden\n' > .hidden/h.txt &&
printf 'ignored.txt\n' > .ignore && printf 'match ignored\n' > ignored.txt &&
printf 'x --pre=evil y\n' > flags.txt && printf 'crlf match\r\nnext\r\n' > crlf.txt`)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		req  opsapi.SearchRequest
		want string
	}{
		{"directory, relative paths, hidden included, ignore files respected",
			opsapi.SearchRequest{Pattern: "match", Path: "."},
			".hidden/h.txt:1: match hidden\ncrlf.txt:1: crlf match\nsrc/a.txt:2: match here\n"},
		{"ignore case",
			opsapi.SearchRequest{Pattern: "match upper", Path: "src", IgnoreCase: true},
			"deep/b.go:1: MATCH upper\n"},
		{"glob with leading ./ is rooted at the search dir",
			opsapi.SearchRequest{Pattern: "(?i)match", Path: ".", Glob: "./src/**/*.go"},
			"src/deep/b.go:1: MATCH upper\n"},
		{"single file is named by its base name, with context",
			opsapi.SearchRequest{Pattern: "match", Path: "src/a.txt", Context: 1},
			"a.txt-1- one\na.txt:2: match here\na.txt-3- three\n"},
		{"a pattern that looks like a flag is searched as text",
			opsapi.SearchRequest{Pattern: "--pre=evil", Path: ".", Literal: true},
			"flags.txt:1: x --pre=evil y\n"},
		{"literal",
			opsapi.SearchRequest{Pattern: "a.txt", Path: ".", Literal: true},
			""},
	} {
		res, err := ws.Search(ctx, tc.req)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		slicesSort(res.Lines)
		if got := fmtLines(res.Lines); got != tc.want || res.LimitReached {
			t.Errorf("%s:\n got %q (limit reached %v)\nwant %q", tc.name, got, res.LimitReached, tc.want)
		}
	}
}

// slicesSort orders lines by path; ripgrep's file order is not fixed.
func slicesSort(ls []opsapi.SearchLine) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Path < ls[j-1].Path; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

func TestSearchLimit(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "rg")
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, `printf 'before\nmatch one\nafter\nmatch two\n' > context.txt && seq 1 100000 | sed 's/^/match /' > many.txt`)
	res, err := ws.Search(t.Context(), opsapi.SearchRequest{Pattern: "match", Path: "context.txt", Limit: 1, Context: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmtLines(res.Lines); got != "context.txt-1- before\ncontext.txt:2: match one\ncontext.txt-3- after\n" || !res.LimitReached {
		t.Fatalf("got %q, reached %v", got, res.LimitReached)
	}
	res, err = ws.Search(t.Context(), opsapi.SearchRequest{Pattern: "match", Path: "many.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Lines) != 100 || !res.LimitReached {
		t.Fatalf("default limit: %d lines, reached %v", len(res.Lines), res.LimitReached)
	}
	// Exactly limit matches and no more: not reached.
	res, err = ws.Search(t.Context(), opsapi.SearchRequest{Pattern: "match", Path: "context.txt", Limit: 2})
	if err != nil || len(res.Lines) != 2 || res.LimitReached {
		t.Fatalf("exact limit: %+v %v", res, err)
	}
}

func TestSearchErrors(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "rg")
	ws := newWorkspace(t, local.Config{})
	sh(t, ws, "echo x > f && ln -s / out")
	ctx := t.Context()
	if _, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: "(", Path: "."}); !errors.Is(err, opsapi.ErrInvalid) ||
		!strings.Contains(err.Error(), "regex parse error") {
		t.Errorf("invalid regex: %v, want ErrInvalid with rg's message", err)
	}
	if _, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: "x", Path: "missing"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
	for _, p := range []string{"..", "/etc", "out", "out/etc"} {
		if _, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: "root", Path: p}); !errors.Is(err, opsapi.ErrPermission) {
			t.Errorf("Search(%q): %v, want ErrPermission", p, err)
		}
	}
	// Searching the root does not follow the link out.
	res, err := ws.Search(ctx, opsapi.SearchRequest{Pattern: "root:", Path: "."})
	if err != nil || len(res.Lines) != 0 {
		t.Errorf("root search followed a link out: %v %v", fmtLines(res.Lines), err)
	}
	noRg := newWorkspace(t, local.Config{Exec: execconf.Exec{RgPath: "/nonexistent/rg"}})
	if _, err := noRg.Search(ctx, opsapi.SearchRequest{Pattern: "x", Path: "."}); !errors.Is(err, opsapi.ErrUnavailable) ||
		!strings.Contains(err.Error(), "ripgrep (rg) is not available") {
		t.Errorf("missing rg: %v", err)
	}
}

func TestSearchHugeLineStaysBounded(t *testing.T) {
	t.Parallel()
	testutil.RequireCommand(t, "rg")
	ws := newWorkspace(t, local.Config{})
	// One 32 MiB line with a match at its end, and invalid UTF-8.
	f, err := os.Create(ws.Root() + "/big.txt")
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("a", 1<<20))
	for range 32 {
		_, _ = f.Write(chunk)
	}
	_, _ = f.WriteString("\xff NEEDLE\n")
	f.Close()
	res, err := ws.Search(t.Context(), opsapi.SearchRequest{Pattern: "NEEDLE", Path: "."})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Lines) != 1 || len(res.Lines[0].Text) != 64<<10 || res.Lines[0].Line != 1 {
		t.Fatalf("got %d lines, text %d bytes", len(res.Lines), len(res.Lines[0].Text))
	}
}
