package globwalk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/wsbroker/wsbroker/opsapi"
)

// DefaultLimit is the number of results when a request gives none.
const DefaultLimit = 1000

// FS is what a walk needs from a file system. Paths are slash-separated
// names the FS itself understands (relative to an os.Root, or absolute
// over SFTP); the walker only joins them with path.Join.
type FS interface {
	// ReadDir lists dir. Entries describe the entries themselves, not
	// what symbolic links point to (lstat), in any order.
	ReadDir(ctx context.Context, dir string) ([]fs.DirEntry, error)
	// ReadFile returns a small file's content (an ignore file). An
	// implementation may cap the size it reads.
	ReadFile(ctx context.Context, name string) ([]byte, error)
}

// Request is one glob search.
type Request struct {
	// Dir is the search directory, as an FS path.
	Dir string
	// Top, if set, is Dir or an ancestor of it (an FS path): ignore files
	// in Top and in every directory between it and Dir apply too. Empty
	// means only ignore files from Dir down.
	Top string
	// Pattern is the glob; see the package documentation.
	Pattern string
	// Ignore lists globs of paths to leave out.
	Ignore []string
	// Limit is the maximum number of results; <= 0 means DefaultLimit.
	Limit int
}

// Ignore-file kinds, in increasing precedence.
const (
	kindGit = iota // .git/info/exclude, then .gitignore
	kindIgnore
	kindFd
	numKinds
)

var ignoreFiles = []struct {
	name string
	kind int
}{
	{".gitignore", kindGit},
	{".ignore", kindIgnore},
	{".fdignore", kindFd},
}

// Glob walks req.Dir and returns the matches relative to it, directories
// with a trailing '/'. An invalid pattern or ignore glob is
// opsapi.ErrInvalid with a message containing "error parsing glob"; an
// error listing req.Dir itself is returned as the FS gave it, while
// unreadable sub-directories are skipped, as fd does. When ctx ends the
// walk stops with its error.
func Glob(ctx context.Context, fsys FS, req Request) (opsapi.GlobResult, error) {
	m, err := compile(req.Pattern, req.Ignore)
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	w := &walker{fsys: fsys, m: m, limit: limit, res: opsapi.GlobResult{Paths: []string{}}}

	// Ignore rules are matched on paths relative to the top directory;
	// results are relative to the search directory.
	var prefix []string
	if req.Top != "" && req.Top != req.Dir {
		rel, ok := relative(req.Top, req.Dir)
		if !ok {
			return opsapi.GlobResult{}, opsapi.E("glob", req.Dir, opsapi.ErrInvalid,
				fmt.Errorf("top %q does not contain %q", req.Top, req.Dir))
		}
		prefix = rel
		dir := req.Top
		for i := 0; i < len(prefix); i++ {
			w.push(w.loadLevel(ctx, dir, prefix[:i], nil))
			dir = path.Join(dir, prefix[i])
		}
	}

	entries, err := fsys.ReadDir(ctx, req.Dir)
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	if err := w.walk(ctx, req.Dir, prefix, "", entries); err != nil && !errors.Is(err, errStop) {
		return opsapi.GlobResult{}, err
	}
	return w.res, nil
}

// errStop ends the walk once the limit is passed.
var errStop = errors.New("limit reached")

type level [numKinds][]gitignore.Pattern

type walker struct {
	fsys   FS
	m      *matcher
	limit  int
	levels []level
	res    opsapi.GlobResult
}

func (w *walker) push(l level) { w.levels = append(w.levels, l) }
func (w *walker) pop()         { w.levels = w.levels[:len(w.levels)-1] }

// walk visits the entries of dir (FS path), whose path is segs relative to
// the top and rel relative to the search directory.
func (w *walker) walk(ctx context.Context, dir string, segs []string, rel string, entries []fs.DirEntry) error {
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	w.push(w.loadLevel(ctx, dir, segs, entries))
	defer w.pop()

	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return opsapi.E("glob", dir, nil, err)
		}
		name := e.Name()
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			continue
		}
		isDir := e.Type()&fs.ModeSymlink == 0 && e.IsDir()
		childSegs := append(segs[:len(segs):len(segs)], name)
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		if w.ignored(childSegs, isDir) || w.m.excluded(childRel, name) {
			continue
		}
		if w.m.match(childRel, name) {
			if len(w.res.Paths) == w.limit {
				w.res.LimitReached = true
				return errStop
			}
			p := childRel
			if isDir {
				p += "/"
			}
			w.res.Paths = append(w.res.Paths, p)
		}
		if !isDir {
			continue
		}
		child := path.Join(dir, name)
		sub, err := w.fsys.ReadDir(ctx, child)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return opsapi.E("glob", child, nil, ctxErr)
			}
			continue // unreadable: skipped, as fd does
		}
		if err := w.walk(ctx, child, childSegs, childRel, sub); err != nil {
			return err
		}
	}
	return nil
}

// loadLevel reads the ignore files of dir. With entries given, only files
// that exist in the listing are read; without, each is tried.
func (w *walker) loadLevel(ctx context.Context, dir string, segs []string, entries []fs.DirEntry) level {
	var l level
	has := func(name string, wantDir bool) bool {
		if entries == nil {
			return true
		}
		for _, e := range entries {
			if e.Name() == name {
				return !wantDir || e.IsDir()
			}
		}
		return false
	}
	if has(".git", true) {
		l[kindGit] = append(l[kindGit], w.readPatterns(ctx, path.Join(dir, ".git", "info", "exclude"), segs)...)
	}
	for _, f := range ignoreFiles {
		if has(f.name, false) {
			l[f.kind] = append(l[f.kind], w.readPatterns(ctx, path.Join(dir, f.name), segs)...)
		}
	}
	return l
}

func (w *walker) readPatterns(ctx context.Context, name string, domain []string) []gitignore.Pattern {
	b, err := w.fsys.ReadFile(ctx, name)
	if err != nil {
		return nil
	}
	var ps []gitignore.Pattern
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// ignored applies the ignore files: the first decisive rule wins, looking
// at .fdignore, then .ignore, then .gitignore files, deepest directory
// first and, within a file, last rule first.
func (w *walker) ignored(segs []string, isDir bool) bool {
	for kind := numKinds - 1; kind >= 0; kind-- {
		for i := len(w.levels) - 1; i >= 0; i-- {
			ps := w.levels[i][kind]
			for j := len(ps) - 1; j >= 0; j-- {
				switch ps[j].Match(segs, isDir) {
				case gitignore.Exclude:
					return true
				case gitignore.Include:
					return false
				}
			}
		}
	}
	return false
}

// matcher holds a validated pattern and ignore globs.
type matcher struct {
	pattern     string
	full        bool // pattern has '/': match the relative path
	fold        bool // smart case: no upper-case letter in the pattern
	trailingAny bool // pattern ends in "/**": the directory itself is no match
	ignore      []ignoreGlob
}

type ignoreGlob struct {
	pattern string
	full    bool
}

func compile(pattern string, ignore []string) (*matcher, error) {
	p := strings.TrimPrefix(pattern, "./")
	if strings.Contains(p, "/") {
		p = strings.TrimLeft(p, "/")
	}
	if !doublestar.ValidatePattern(p) {
		return nil, badGlob(pattern)
	}
	m := &matcher{pattern: p, full: strings.Contains(p, "/")}
	m.fold = !strings.ContainsFunc(p, unicode.IsUpper)
	m.trailingAny = m.full && strings.HasSuffix(p, "/**")
	for _, g := range ignore {
		q := strings.TrimPrefix(g, "./")
		if !doublestar.ValidatePattern(q) {
			return nil, badGlob(g)
		}
		m.ignore = append(m.ignore, ignoreGlob{pattern: q, full: strings.Contains(q, "/")})
	}
	return m, nil
}

func badGlob(p string) error {
	return opsapi.E("glob", "", opsapi.ErrInvalid,
		fmt.Errorf("error parsing glob '%s': %w", p, doublestar.ErrBadPattern))
}

// match reports whether the entry at rel (base name name) is a result.
func (m *matcher) match(rel, name string) bool {
	target := name
	if m.full {
		target = rel
	}
	if m.fold {
		target = strings.ToLower(target)
	}
	if !doublestar.MatchUnvalidated(m.pattern, target) {
		return false
	}
	if m.trailingAny && doublestar.MatchUnvalidated(m.pattern[:len(m.pattern)-3], target) {
		return false
	}
	return true
}

// excluded reports whether an Ignore glob covers rel.
func (m *matcher) excluded(rel, name string) bool {
	for _, g := range m.ignore {
		target := name
		if g.full {
			target = rel
		}
		if doublestar.MatchUnvalidated(g.pattern, target) {
			return true
		}
	}
	return false
}

// relative returns the segments of dir below top, or false when dir is not
// top or below it.
func relative(top, dir string) ([]string, bool) {
	top, dir = path.Clean(top), path.Clean(dir)
	switch {
	case top == dir:
		return nil, true
	case top == ".":
		if dir == ".." || strings.HasPrefix(dir, "../") || path.IsAbs(dir) {
			return nil, false
		}
		return strings.Split(dir, "/"), true
	case top == "/":
		if !path.IsAbs(dir) {
			return nil, false
		}
		return strings.Split(dir[1:], "/"), true
	case strings.HasPrefix(dir, top+"/"):
		return strings.Split(dir[len(top)+1:], "/"), true
	}
	return nil, false
}
