package globwalk_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/internal/globwalk"
	"github.com/wsbroker/wsbroker/opsapi"
)

// rootFS is the FS a backend builds over an os.Root: real files, paths
// relative to the root.
type rootFS struct {
	root  *os.Root
	reads []string // ReadDir calls, to check pruning
}

func (r *rootFS) ReadDir(ctx context.Context, dir string) ([]fs.DirEntry, error) {
	r.reads = append(r.reads, dir)
	f, err := r.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func (r *rootFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	return r.root.ReadFile(name)
}

// tree builds files under a temp dir: "a/b.txt" is a file, "a/c/" a
// directory, "l -> target" a symlink; a file's content follows ": ".
func tree(t *testing.T, spec ...string) *rootFS {
	t.Helper()
	dir := t.TempDir()
	for _, s := range spec {
		var content string
		if i := strings.Index(s, ": "); i >= 0 {
			s, content = s[:i], s[i+2:]
		}
		switch {
		case strings.Contains(s, " -> "):
			name, target, _ := strings.Cut(s, " -> ")
			mkdirs(t, filepath.Join(dir, filepath.Dir(name)))
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(s, "/"):
			mkdirs(t, filepath.Join(dir, s))
		default:
			mkdirs(t, filepath.Join(dir, filepath.Dir(s)))
			if err := os.WriteFile(filepath.Join(dir, s), []byte(strings.ReplaceAll(content, `\n`, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &rootFS{root: root}
}

func mkdirs(t *testing.T, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

var piIgnore = []string{"**/node_modules/**", "**/.git/**"}

func TestGlob(t *testing.T) {
	tests := []struct {
		name    string
		tree    []string
		dir     string
		top     string
		pattern string
		ignore  []string
		want    []string
	}{
		{
			name:    "base name at any depth, sorted depth first",
			tree:    []string{"b.ts", "a/x.ts", "a/y.js", "a/deep/z.ts", "c.TS"},
			pattern: "*.ts",
			want:    []string{"a/deep/z.ts", "a/x.ts", "b.ts", "c.TS"},
		},
		{
			name:    "smart case: an upper-case letter makes it case-sensitive",
			tree:    []string{"c.TS", "d.ts"},
			pattern: "*.TS",
			want:    []string{"c.TS"},
		},
		{
			name:    "hidden files and directories included",
			tree:    []string{".secret/hidden.txt", ".env", "visible.txt"},
			pattern: "*",
			want:    []string{".env", ".secret/", ".secret/hidden.txt", "visible.txt"},
		},
		{
			name:    "directories get a trailing slash",
			tree:    []string{"src/", "src/lib/", "src/lib/a.go"},
			pattern: "*",
			want:    []string{"src/", "src/lib/", "src/lib/a.go"},
		},
		{
			name:    "gitignore outside a git repository",
			tree:    []string{".gitignore: ignored.txt\nbuild/", "ignored.txt", "kept.txt", "build/out.txt", "sub/ignored.txt"},
			pattern: "*.txt",
			want:    []string{"kept.txt"},
		},
		{
			name:    "negation re-includes",
			tree:    []string{".gitignore: *.log\n!keep.log", "a.log", "keep.log"},
			pattern: "*.log",
			want:    []string{"keep.log"},
		},
		{
			name:    ".ignore and .fdignore too, .fdignore winning",
			tree:    []string{".ignore: *.tmp\n*.bak", ".fdignore: !x.bak", "a.tmp", "x.bak", "y.bak", "k.md"},
			pattern: "*.*",
			want:    []string{".fdignore", ".ignore", "k.md", "x.bak"},
		},
		{
			name:    "anchored gitignore rule applies only at its level",
			tree:    []string{".gitignore: /top.txt", "top.txt", "sub/top.txt"},
			pattern: "top.txt",
			want:    []string{"sub/top.txt"},
		},
		{
			name:    "git info/exclude inside a repository",
			tree:    []string{".git/info/exclude: secret.txt", "secret.txt", "open.txt"},
			pattern: "*.txt",
			ignore:  piIgnore,
			want:    []string{"open.txt"},
		},
		{
			name:    "ignore globs prune node_modules and .git",
			tree:    []string{"node_modules/pkg/index.js", "a/node_modules/x.js", ".git/HEAD", "src/index.js"},
			pattern: "*",
			ignore:  piIgnore,
			want:    []string{"a/", "src/", "src/index.js"},
		},
		{
			name:    "ignore glob without slash matches base names",
			tree:    []string{"a/x.log", "b.log", "c.txt"},
			pattern: "*",
			ignore:  []string{"*.log"},
			want:    []string{"a/", "c.txt"},
		},
		{
			name:    "symlinks are reported by name and never followed",
			tree:    []string{"real/f.txt", "link -> real", "flink -> real/f.txt", "dangling -> nowhere", "out -> /etc"},
			pattern: "*",
			want:    []string{"dangling", "flink", "link", "out", "real/", "real/f.txt"},
		},
		{
			name:    "leading ./ dropped",
			tree:    []string{"src/a.go", "b.go"},
			pattern: "./src/*.go",
			want:    []string{"src/a.go"},
		},
		{
			name:    "path pattern is anchored to the search directory",
			tree:    []string{"src/a.go", "lib/src/b.go"},
			pattern: "src/*.go",
			want:    []string{"src/a.go"},
		},
		{
			name:    "search in a sub-directory sees the parents' ignore files",
			tree:    []string{".gitignore: *.gen.go", "pkg/a.go", "pkg/a.gen.go"},
			dir:     "pkg",
			top:     ".",
			pattern: "*.go",
			want:    []string{"a.go"},
		},
		{
			name:    "without top the parents' ignore files do not apply",
			tree:    []string{".gitignore: *.gen.go", "pkg/a.go", "pkg/a.gen.go"},
			dir:     "pkg",
			pattern: "*.go",
			want:    []string{"a.gen.go", "a.go"},
		},
		{
			name:    "parent rule with a path is scoped to the parent",
			tree:    []string{".gitignore: pkg/gen/", "pkg/gen/x.go", "pkg/y.go"},
			dir:     "pkg",
			top:     ".",
			pattern: "*.go",
			want:    []string{"y.go"},
		},
		{
			name:    "CRLF ignore file",
			tree:    []string{".gitignore: a.txt\r\nb.txt\r\n", "a.txt", "b.txt", "c.txt"},
			pattern: "*.txt",
			want:    []string{"c.txt"},
		},
		{
			name:    "character class and braces",
			tree:    []string{"a1.go", "b2.go", "c.go", "d.md"},
			pattern: "{[ab][0-9].go,*.md}",
			want:    []string{"a1.go", "b2.go", "d.md"},
		},
		// pi's suite/regressions/3302-find-path-glob.test.ts
		{
			name:    "3302 *.spec.ts finds nested files",
			tree:    regression3302,
			pattern: "*.spec.ts",
			want:    []string{"other/src/foo/other.spec.ts", "src/foo/bar/example.spec.ts", "src/top.spec.ts"},
		},
		{
			name:    "3302 src/**/*.spec.ts is anchored",
			tree:    regression3302,
			pattern: "src/**/*.spec.ts",
			want:    []string{"src/foo/bar/example.spec.ts", "src/top.spec.ts"},
		},
		{
			name:    "3302 src/foo/**/*.spec.ts is exactly the one file",
			tree:    regression3302,
			pattern: "src/foo/**/*.spec.ts",
			want:    []string{"src/foo/bar/example.spec.ts"},
		},
		{
			name:    "3302 some/parent/child/**",
			tree:    regression3302,
			pattern: "some/parent/child/**",
			want:    []string{"some/parent/child/file.ext", "some/parent/child/nested/", "some/parent/child/nested/deep.ext"},
		},
		{
			name:    "3302 **/parent/child/*",
			tree:    regression3302,
			pattern: "**/parent/child/*",
			want:    []string{"other/parent/child/x.ext", "some/parent/child/file.ext", "some/parent/child/nested/"},
		},
		// pi's suite/regressions/3303-find-nested-gitignore.test.ts
		{
			name: "3303 nested gitignore, flat",
			tree: []string{
				"a/.gitignore: ignored.txt", "a/ignored.txt", "a/kept.txt",
				"b/ignored.txt", "b/kept.txt",
			},
			pattern: "*.txt",
			ignore:  piIgnore,
			want:    []string{"a/kept.txt", "b/ignored.txt", "b/kept.txt"},
		},
		{
			name: "3303 nested gitignore, deep",
			tree: []string{
				".gitignore: root-ignored.txt",
				"root-ignored.txt", "root-kept.txt",
				"pkg/a/.gitignore: *.log\n!important.log",
				"pkg/a/x.log", "pkg/a/important.log", "pkg/a/deeper/y.log", "pkg/a/deeper/root-ignored.txt",
				"pkg/b/z.log", "pkg/b/root-ignored.txt",
				"pkg/a/deeper/.gitignore: keep-only-here.txt",
				"pkg/a/deeper/keep-only-here.txt", "pkg/b/keep-only-here.txt",
			},
			pattern: "*.{txt,log}",
			ignore:  piIgnore,
			want: []string{
				"pkg/a/important.log", "pkg/b/keep-only-here.txt", "pkg/b/z.log", "root-kept.txt",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := tree(t, tc.tree...)
			dir := tc.dir
			if dir == "" {
				dir = "."
			}
			res, err := globwalk.Glob(t.Context(), fsys, globwalk.Request{
				Dir: dir, Top: tc.top, Pattern: tc.pattern, Ignore: tc.ignore,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Paths, tc.want) {
				t.Errorf("Glob(%q)\n got %q\nwant %q", tc.pattern, res.Paths, tc.want)
			}
			if res.LimitReached {
				t.Error("LimitReached set without a limit")
			}
		})
	}
}

var regression3302 = []string{
	"src/foo/bar/example.spec.ts", "src/top.spec.ts", "src/foo/bar/example.ts",
	"other/src/foo/other.spec.ts",
	"some/parent/child/file.ext", "some/parent/child/nested/deep.ext", "some/parent/sibling.ext",
	"other/parent/child/x.ext",
}

func TestGlobLimit(t *testing.T) {
	fsys := tree(t, "a.txt", "b.txt", "c.txt")
	for _, tc := range []struct {
		limit   int
		want    []string
		reached bool
	}{
		{1, []string{"a.txt"}, true},
		{2, []string{"a.txt", "b.txt"}, true},
		{3, []string{"a.txt", "b.txt", "c.txt"}, false}, // exactly limit, no more: not reached
		{4, []string{"a.txt", "b.txt", "c.txt"}, false},
	} {
		res, err := globwalk.Glob(t.Context(), fsys, globwalk.Request{Dir: ".", Pattern: "*.txt", Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Paths, tc.want) || res.LimitReached != tc.reached {
			t.Errorf("limit %d: got %q reached=%v, want %q reached=%v", tc.limit, res.Paths, res.LimitReached, tc.want, tc.reached)
		}
	}
}

func TestGlobPrunesIgnoredDirectories(t *testing.T) {
	fsys := tree(t, ".gitignore: build/", "build/deep/x.go", "node_modules/m/y.go", "src/z.go")
	res, err := globwalk.Glob(t.Context(), fsys, globwalk.Request{Dir: ".", Pattern: "*.go", Ignore: piIgnore})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Paths, []string{"src/z.go"}) {
		t.Fatalf("got %q", res.Paths)
	}
	for _, d := range fsys.reads {
		if strings.HasPrefix(d, "build") || strings.HasPrefix(d, "node_modules") {
			t.Errorf("descended into ignored directory %q", d)
		}
	}
}

func TestGlobInvalidPattern(t *testing.T) {
	fsys := tree(t, "a.txt")
	for _, req := range []globwalk.Request{
		{Dir: ".", Pattern: "["},
		{Dir: ".", Pattern: "src/{a"},
		{Dir: ".", Pattern: "*", Ignore: []string{"[z"}},
	} {
		_, err := globwalk.Glob(t.Context(), fsys, req)
		if !errors.Is(err, opsapi.ErrInvalid) || !strings.Contains(err.Error(), "error parsing glob") {
			t.Errorf("%+v: err = %v, want ErrInvalid with \"error parsing glob\"", req, err)
		}
	}
}

func TestGlobNoMatchesIsEmptyNotNil(t *testing.T) {
	fsys := tree(t, "a.txt")
	res, err := globwalk.Glob(t.Context(), fsys, globwalk.Request{Dir: ".", Pattern: "--help"})
	if err != nil || res.Paths == nil || len(res.Paths) != 0 {
		t.Fatalf("got %#v, %v; want an empty, non-nil list", res.Paths, err)
	}
}

func TestGlobMissingDir(t *testing.T) {
	fsys := tree(t, "a.txt")
	_, err := globwalk.Glob(t.Context(), fsys, globwalk.Request{Dir: "nope", Pattern: "*"})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want the FS's not-exist error", err)
	}
	_, err = globwalk.Glob(t.Context(), fsys, globwalk.Request{Dir: "a", Top: "b", Pattern: "*"})
	if !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("top not containing dir: err = %v, want ErrInvalid", err)
	}
}

func TestGlobHonoursContext(t *testing.T) {
	fsys := tree(t, "a/b/c.txt", "d.txt")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := globwalk.Glob(ctx, fsys, globwalk.Request{Dir: ".", Pattern: "*"})
	if !errors.Is(err, opsapi.ErrCanceled) {
		t.Fatalf("err = %v, want ErrCanceled", err)
	}
}
