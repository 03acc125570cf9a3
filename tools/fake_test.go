package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// fakeWorkspace is an in-memory workspace for the tools' formatting tests:
// files, directories and symbolic links under one root, confined to it,
// with permission bits honoured and errors injectable per operation. Glob
// and Search implement just enough of fd's and ripgrep's semantics
// (sorted walk, basename vs path globs, regex lines with merged context)
// for the tools' output to be checked; the real engines are exercised by
// the backend conformance suite.
type fakeWorkspace struct {
	mu    sync.Mutex
	root  string
	nodes map[string]*fakeNode // by absolute clean path
	fail  map[string]error     // "<op> <abs path>" -> injected error
	calls []string             // "<op> <abs path>", in order
	// hook, when set, runs at the start of every operation (outside the
	// lock), e.g. to block or cancel.
	hook func(op, p string)
}

type fakeNode struct {
	data  []byte
	dir   bool
	link  string // symlink target; "" for files and directories
	mode  fs.FileMode
	mtime time.Time
}

var _ opsapi.Operations = (*fakeBash)(nil)

// fakeBash only completes opsapi.Operations for the compile-time check;
// bash has its own tests.
type fakeBash struct{ *fakeWorkspace }

func (fakeBash) Exec(context.Context, opsapi.ExecRequest) (opsapi.ExecResult, error) {
	return opsapi.ExecResult{}, opsapi.ErrUnavailable
}

var (
	_ opsapi.ReadOperations  = (*fakeWorkspace)(nil)
	_ opsapi.WriteOperations = (*fakeWorkspace)(nil)
	_ opsapi.EditOperations  = (*fakeWorkspace)(nil)
	_ opsapi.LsOperations    = (*fakeWorkspace)(nil)
	_ opsapi.FindOperations  = (*fakeWorkspace)(nil)
	_ opsapi.GrepOperations  = (*fakeWorkspace)(nil)
	_ opsapi.Resolver        = (*fakeWorkspace)(nil)
)

// newFakeWorkspace returns an empty workspace rooted at /w.
func newFakeWorkspace(t testing.TB) *fakeWorkspace {
	t.Helper()
	f := &fakeWorkspace{
		root:  "/w",
		nodes: map[string]*fakeNode{},
		fail:  map[string]error{},
	}
	f.nodes["/w"] = &fakeNode{dir: true, mode: 0o755}
	return f
}

func (f *fakeWorkspace) Root() string { return f.root }

func (f *fakeWorkspace) abs(p string) string { return opsapi.Resolve(f.root, p) }

// addFile creates a file (and its parents) relative to the root or absolute.
func (f *fakeWorkspace) addFile(p, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.abs(p)
	f.mkdirAllLocked(path.Dir(a))
	f.nodes[a] = &fakeNode{data: []byte(content), mode: 0o644}
}

func (f *fakeWorkspace) addDir(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mkdirAllLocked(f.abs(p))
}

// addSymlink makes p a link to target (absolute, or relative to p's dir).
func (f *fakeWorkspace) addSymlink(p, target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.abs(p)
	f.mkdirAllLocked(path.Dir(a))
	f.nodes[a] = &fakeNode{link: target, mode: 0o777}
}

func (f *fakeWorkspace) setMode(p string, mode fs.FileMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[f.abs(p)].mode = mode
}

// failOn makes operation op ("Open", "Access", "WriteFile", "Mkdir",
// "Stat", "ReadDir", "RealPath", "Glob", "Search") on p return err.
func (f *fakeWorkspace) failOn(op, p string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op+" "+f.abs(p)] = err
}

// content returns a file's data, following links.
func (f *fakeWorkspace) content(p string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookupLocked(f.abs(p), true)
	if err != nil || n.dir {
		return "", false
	}
	return string(n.data), true
}

func (f *fakeWorkspace) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeWorkspace) mkdirAllLocked(a string) {
	if n, ok := f.nodes[a]; ok && n.dir {
		return
	}
	if a != "/" {
		f.mkdirAllLocked(path.Dir(a))
	}
	f.nodes[a] = &fakeNode{dir: true, mode: 0o755}
}

// enter records the call, runs the hook and returns an injected error.
func (f *fakeWorkspace) enter(ctx context.Context, op, p string) error {
	if f.hook != nil {
		f.hook(op, p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+p)
	if ctx.Err() != nil {
		return opsapi.E("fake."+op, p, opsapi.ErrCanceled, ctx.Err())
	}
	if !opsapi.Within(f.root, p) {
		return opsapi.E("fake."+op, p, opsapi.ErrPermission, errors.New("path escapes the workspace root"))
	}
	return f.fail[op+" "+p]
}

// lookupLocked walks a, following links in every component (and in the
// last one when follow), and returns the real path and node.
func (f *fakeWorkspace) lookupLocked(a string, follow bool) (string, *fakeNode, error) {
	parts := strings.Split(strings.TrimPrefix(path.Clean(a), "/"), "/")
	cur := "/"
	hops := 0
	for i := 0; i < len(parts); i++ {
		if parts[i] == "" {
			continue
		}
		next := path.Join(cur, parts[i])
		n, ok := f.nodes[next]
		if !ok {
			return "", nil, opsapi.E("fake.lookup", a, opsapi.ErrNotExist, nil)
		}
		if n.link != "" && (follow || i < len(parts)-1) {
			hops++
			if hops > 40 {
				return "", nil, opsapi.E("fake.lookup", a, opsapi.ErrPermission, errors.New("too many links"))
			}
			target := n.link
			if !strings.HasPrefix(target, "/") {
				target = path.Join(cur, target)
			}
			rest := append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), parts[i+1:]...)
			parts, i, cur = rest, -1, "/"
			continue
		}
		if !n.dir && n.link == "" && i < len(parts)-1 {
			return "", nil, opsapi.E("fake.lookup", a, opsapi.ErrNotDir, nil)
		}
		cur = next
	}
	if !opsapi.Within(f.root, cur) {
		return "", nil, opsapi.E("fake.lookup", a, opsapi.ErrPermission, errors.New("link escapes the workspace root"))
	}
	return cur, f.nodes[cur], nil
}

func (f *fakeWorkspace) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := f.enter(ctx, "Open", p); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookupLocked(p, true)
	switch {
	case err != nil:
		return nil, err
	case n.dir:
		return nil, opsapi.E("fake.Open", p, opsapi.ErrIsDir, nil)
	case n.mode&0o400 == 0:
		return nil, opsapi.E("fake.Open", p, opsapi.ErrPermission, nil)
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(n.data))), nil
}

func (f *fakeWorkspace) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	if err := f.enter(ctx, "Access", p); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, n, err := f.lookupLocked(p, true)
	switch {
	case err != nil:
		return err
	case mode&opsapi.AccessRead != 0 && n.mode&0o400 == 0,
		mode&opsapi.AccessWrite != 0 && n.mode&0o200 == 0:
		return opsapi.E("fake.Access", p, opsapi.ErrPermission, nil)
	}
	return nil
}

func (f *fakeWorkspace) WriteFile(ctx context.Context, p string, r io.Reader) error {
	if err := f.enter(ctx, "WriteFile", p); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	real, n, err := f.lookupLocked(p, true)
	switch {
	case errors.Is(err, opsapi.ErrNotExist):
		parent, pn, perr := f.lookupLocked(path.Dir(p), true)
		if perr != nil {
			return perr
		}
		if !pn.dir {
			return opsapi.E("fake.WriteFile", p, opsapi.ErrNotDir, nil)
		}
		f.nodes[path.Join(parent, path.Base(p))] = &fakeNode{data: data, mode: 0o644, mtime: time.Now()}
		return nil
	case err != nil:
		return err
	case n.dir:
		return opsapi.E("fake.WriteFile", p, opsapi.ErrIsDir, nil)
	case n.mode&0o200 == 0:
		return opsapi.E("fake.WriteFile", p, opsapi.ErrPermission, nil)
	}
	f.nodes[real] = &fakeNode{data: data, mode: n.mode, mtime: time.Now()}
	return nil
}

func (f *fakeWorkspace) Mkdir(ctx context.Context, p string) error {
	if err := f.enter(ctx, "Mkdir", p); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Check every existing prefix: a file on the way is ErrNotDir, a file
	// at p ErrExist.
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		cur = path.Join(cur, part)
		real, n, err := f.lookupLocked(cur, true)
		if errors.Is(err, opsapi.ErrNotExist) {
			f.nodes[cur] = &fakeNode{dir: true, mode: 0o755}
			continue
		}
		if err != nil {
			return err
		}
		if !n.dir {
			if i == len(parts)-1 {
				return opsapi.E("fake.Mkdir", p, opsapi.ErrExist, nil)
			}
			return opsapi.E("fake.Mkdir", p, opsapi.ErrNotDir, nil)
		}
		cur = real
	}
	return nil
}

func (f *fakeWorkspace) infoLocked(name, p string) (opsapi.FileInfo, error) {
	_, n, err := f.lookupLocked(p, true)
	if err != nil {
		if ln, ok := f.nodes[p]; ok && ln.link != "" {
			return opsapi.FileInfo{Name: name, Type: opsapi.TypeSymlink, Symlink: true}, nil
		}
		return opsapi.FileInfo{}, err
	}
	fi := opsapi.FileInfo{Name: name, Type: opsapi.TypeFile, Size: int64(len(n.data)), Mode: n.mode, ModTime: n.mtime}
	if n.dir {
		fi.Type, fi.Size = opsapi.TypeDir, 0
	}
	if ln, ok := f.nodes[p]; ok && ln.link != "" {
		fi.Symlink = true
	}
	return fi, nil
}

func (f *fakeWorkspace) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	if err := f.enter(ctx, "Stat", p); err != nil {
		return opsapi.FileInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, _, err := f.lookupLocked(p, true); err != nil {
		return opsapi.FileInfo{}, err
	}
	return f.infoLocked(path.Base(p), p)
}

func (f *fakeWorkspace) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	if err := f.enter(ctx, "ReadDir", p); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	real, n, err := f.lookupLocked(p, true)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, opsapi.E("fake.ReadDir", p, opsapi.ErrNotDir, nil)
	}
	var out []opsapi.FileInfo
	for _, child := range f.childrenLocked(real) {
		fi, err := f.infoLocked(path.Base(child), child)
		if err != nil {
			return nil, err
		}
		out = append(out, fi)
	}
	return out, nil
}

// childrenLocked lists the direct children of dir, sorted by path.
func (f *fakeWorkspace) childrenLocked(dir string) []string {
	var out []string
	for p := range f.nodes {
		if p != dir && path.Dir(p) == dir {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (f *fakeWorkspace) RealPath(ctx context.Context, p string) (string, error) {
	if err := f.enter(ctx, "RealPath", p); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	real, _, err := f.lookupLocked(p, true)
	return real, err
}

// walkLocked lists every path under dir (not following links), sorted,
// with '/' appended to directories, relative to dir.
func (f *fakeWorkspace) walkLocked(dir string, skip func(rel string) bool) []string {
	var out []string
	var walk func(d, rel string)
	walk = func(d, rel string) {
		for _, child := range f.childrenLocked(d) {
			r := path.Join(rel, path.Base(child))
			n := f.nodes[child]
			if n.dir {
				if skip(r + "/") {
					continue
				}
				out = append(out, r+"/")
				walk(child, r)
				continue
			}
			if !skip(r) {
				out = append(out, r)
			}
		}
	}
	walk(dir, "")
	return out
}

// globRegexp turns a glob into a regexp: '**/' any directories, '*' and
// '?' within one component, '[...]' classes.
func globRegexp(g string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("error parsing glob '%s': unclosed character class", g)
			}
			b.WriteString("[" + strings.ReplaceAll(g[i+1:i+1+end], "!", "^") + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

func (f *fakeWorkspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	if err := f.enter(ctx, "Glob", req.Dir); err != nil {
		return opsapi.GlobResult{}, err
	}
	re, err := globRegexp(req.Pattern)
	if err != nil {
		return opsapi.GlobResult{}, opsapi.E("fake.Glob", req.Dir, opsapi.ErrInvalid, err)
	}
	var ignores []*regexp.Regexp
	for _, ig := range req.Ignore {
		r, err := globRegexp(ig)
		if err != nil {
			return opsapi.GlobResult{}, opsapi.E("fake.Glob", req.Dir, opsapi.ErrInvalid, err)
		}
		ignores = append(ignores, r)
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 1000
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	real, n, err := f.lookupLocked(req.Dir, true)
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	if !n.dir {
		return opsapi.GlobResult{}, opsapi.E("fake.Glob", req.Dir, opsapi.ErrNotDir, nil)
	}
	all := f.walkLocked(real, func(rel string) bool {
		for _, ig := range ignores {
			if ig.MatchString(strings.TrimSuffix(rel, "/")) || ig.MatchString(strings.TrimSuffix(rel, "/")+"/x") {
				return true
			}
		}
		return false
	})
	var res opsapi.GlobResult
	for _, rel := range all {
		subject := strings.TrimSuffix(rel, "/")
		if !strings.Contains(req.Pattern, "/") {
			subject = path.Base(subject)
		}
		if !re.MatchString(subject) {
			continue
		}
		if len(res.Paths) == limit {
			res.LimitReached = true
			break
		}
		res.Paths = append(res.Paths, rel)
	}
	return res, nil
}

func (f *fakeWorkspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	if err := f.enter(ctx, "Search", req.Path); err != nil {
		return opsapi.SearchResult{}, err
	}
	expr := req.Pattern
	if req.Literal {
		expr = regexp.QuoteMeta(expr)
	}
	if req.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E("fake.Search", req.Path, opsapi.ErrInvalid, fmt.Errorf("regex parse error: %v", err))
	}
	var globRe *regexp.Regexp
	if req.Glob != "" {
		if globRe, err = globRegexp(req.Glob); err != nil {
			return opsapi.SearchResult{}, opsapi.E("fake.Search", req.Path, opsapi.ErrInvalid, err)
		}
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 100
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	real, n, err := f.lookupLocked(req.Path, true)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	type file struct{ display, abs string }
	var files []file
	if n.dir {
		for _, rel := range f.walkLocked(real, func(string) bool { return false }) {
			if strings.HasSuffix(rel, "/") {
				continue
			}
			subject := rel
			if globRe != nil && !strings.Contains(req.Glob, "/") {
				subject = path.Base(rel)
			}
			if globRe != nil && !globRe.MatchString(subject) {
				continue
			}
			files = append(files, file{rel, path.Join(real, rel)})
		}
	} else {
		files = []file{{path.Base(req.Path), real}}
	}
	var res opsapi.SearchResult
	matches := 0
	for _, fl := range files {
		node := f.nodes[fl.abs]
		if node == nil || node.link != "" || bytes.IndexByte(node.data, 0) >= 0 {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(node.data), "\n"), "\n")
		emitted := 0 // lines[:emitted] already output for this file
		for i, line := range lines {
			if !re.MatchString(line) {
				continue
			}
			if matches == limit {
				res.LimitReached = true
				return res, nil
			}
			matches++
			from := max(i-req.Context, emitted)
			for j := from; j < i; j++ {
				res.Lines = append(res.Lines, opsapi.SearchLine{Path: fl.display, Line: j + 1, Text: lines[j]})
			}
			res.Lines = append(res.Lines, opsapi.SearchLine{Path: fl.display, Line: i + 1, Text: line, Match: true})
			emitted = i + 1
			// Trailing context stops before the next match.
			for j := i + 1; j <= i+req.Context && j < len(lines) && !re.MatchString(lines[j]); j++ {
				res.Lines = append(res.Lines, opsapi.SearchLine{Path: fl.display, Line: j + 1, Text: lines[j]})
				emitted = j + 1
			}
		}
	}
	return res, nil
}
