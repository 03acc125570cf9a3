package tarball

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Limits bound one archive, in or out.
type Limits struct {
	// MaxEntries bounds the entries (files, directories, links, refused
	// ones too).
	MaxEntries int
	// MaxBytes bounds the bytes of file content.
	MaxBytes int64
}

// Refusal is an entry that did not land, and why.
type Refusal struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	index  int    // the entry's number, for the report's order
}

// Report says what an archive moved.
type Report struct {
	Files   int       `json:"files"`
	Dirs    int       `json:"dirs"`
	Links   int       `json:"links"`
	Bytes   int64     `json:"bytes"` // file content
	Refused []Refusal `json:"refused"`
}

// Dest is where Extract lands entries: paths as the workspace's
// operations take them.
type Dest struct {
	Files opsapi.WriteOperations
	// Tree makes links and sets modes; nil refuses links and leaves files
	// with the modes WriteFile gives.
	Tree opsapi.TreeOperations
}

// Extract lands the tar stream r (compressed as c) in directory dir,
// made if missing. Entries that could land outside dir, or are not
// files, directories or links, are refused and reported; so is an entry
// the workspace or its policy refuses (a denied path, a name in use by
// another type). Exceeding a limit, a malformed archive, a full disk or a
// failing workspace end the extraction with an error, and the report
// says what landed before.
func Extract(ctx context.Context, r io.Reader, c Compression, d Dest, dir string, lim Limits) (Report, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(writers)
	x := &extraction{ctx: gctx, g: g, d: d, dir: dir, lim: lim, links: map[string]bool{}, made: map[string]bool{}, inflight: map[string]chan struct{}{}}
	zr, release, err := decompress(r, c)
	if err != nil {
		return x.rep, opsapi.E("extract", dir, opsapi.ErrInvalid, err)
	}
	defer release()
	if err := d.Files.Mkdir(ctx, dir); err != nil {
		return x.rep, err
	}
	err = x.run(tar.NewReader(zr))
	// A writer's failure comes first: it is why the loop was canceled.
	if werr := g.Wait(); werr != nil {
		err = werr
	}
	slices.SortStableFunc(x.rep.Refused, func(a, b Refusal) int { return a.index - b.index })
	if err != nil {
		return x.rep, err
	}
	return x.rep, x.dirModes()
}

// Files of up to bufferMax bytes are read from the tar into memory and
// written by one of writers goroutines, so that the workspace's per-file
// round trips (several over SFTP) overlap; larger ones are written in
// line. At most writers+1 buffers are held.
const (
	writers   = 4
	bufferMax = 4 << 20
)

// run lands the entries of tr.
func (x *extraction) run(tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return x.streamErr(err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // archive-wide metadata, nothing to land
		}
		if x.index++; x.index > x.lim.MaxEntries {
			return opsapi.E("extract", x.dir, opsapi.ErrTooLarge, fmt.Errorf("the archive has more than %d entries", x.lim.MaxEntries))
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
		if err := x.ctx.Err(); err != nil {
			return err // a writer failed
		}
	}
}

// extraction is one Extract's state. Only the loop (run) touches it,
// except rep, which writers update under mu.
type extraction struct {
	ctx context.Context // ends when a writer fails
	g   *errgroup.Group
	d   Dest
	dir string
	lim Limits

	mu  sync.Mutex
	rep Report

	index int   // the current entry's number
	bytes int64 // file content read so far
	// inflight are the names (clean, relative to dir) being written: an
	// entry waits for those at its name and above it (wait), so the
	// archive lands as if one entry after another.
	inflight map[string]chan struct{}
	// links are the names (clean, relative to dir) of the links made:
	// nothing is written, and no link resolves, through one, so each
	// name's lexical meaning is where it lands.
	links map[string]bool
	// made are the directories (paths as Dest takes them) this
	// extraction made or found: a file's parent is asked for once, not a
	// workspace round trip per file.
	made  map[string]bool
	modes []dirMode // set once everything inside has landed
}

type dirMode struct {
	p    string
	mode fs.FileMode
}

func (x *extraction) refuse(name, format string, args ...any) {
	x.refuseAt(x.index, name, fmt.Sprintf(format, args...))
}

func (x *extraction) refuseAt(index int, name, reason string) {
	x.mu.Lock()
	x.rep.Refused = append(x.rep.Refused, Refusal{Name: name, Reason: reason, index: index})
	x.mu.Unlock()
}

// wait waits until the writes in flight at name and at each directory
// above it are done.
func (x *extraction) wait(name string) {
	for n := name; n != "." && n != "/"; n = path.Dir(n) {
		if ch, ok := x.inflight[n]; ok {
			<-ch
			delete(x.inflight, n)
		}
	}
}

// streamErr is the error of a tar stream that cannot be read on: the
// request body's own error (a body over its limit) when there is one.
func (x *extraction) streamErr(err error) error {
	if _, ok := errors.AsType[*opsapi.Error](err); ok {
		return err
	}
	return opsapi.E("extract", x.dir, opsapi.ErrInvalid, fmt.Errorf("reading the archive: %w", err))
}

// entry lands one entry, or refuses it; an error ends the extraction.
func (x *extraction) entry(hdr *tar.Header, tr *tar.Reader) error {
	name, why := cleanName(hdr.Name)
	if why != "" {
		x.refuse(hdr.Name, "%s", why)
		return nil
	}
	if name != "." && x.throughLink(name) {
		x.refuse(hdr.Name, "its path goes through a link the archive made")
		return nil
	}
	p := path.Join(x.dir, name)
	x.wait(name)
	switch hdr.Typeflag {
	case tar.TypeDir:
		if name == "." {
			return nil
		}
		if err := x.d.Files.Mkdir(x.ctx, p); err != nil {
			return x.failed(hdr.Name, err)
		}
		x.made[p] = true
		x.count(func(r *Report) { r.Dirs++ })
		if m := hdr.FileInfo().Mode().Perm(); m != 0o755 {
			x.modes = append(x.modes, dirMode{p, m})
		}
	case tar.TypeReg, '\x00': // '\x00': old tars' regular file
		return x.file(hdr, tr, name, p)
	case tar.TypeSymlink:
		return x.link(hdr, name, p)
	case tar.TypeLink:
		x.refuse(hdr.Name, "hard links are not supported")
	case tar.TypeChar, tar.TypeBlock:
		x.refuse(hdr.Name, "device files are not allowed")
	case tar.TypeFifo:
		x.refuse(hdr.Name, "fifos are not allowed")
	default:
		x.refuse(hdr.Name, "entry type %q is not supported", string(hdr.Typeflag))
	}
	return nil
}

func (x *extraction) file(hdr *tar.Header, tr *tar.Reader, name, p string) error {
	if name == "." {
		x.refuse(hdr.Name, "a file cannot replace the destination directory")
		return nil
	}
	if x.bytes+hdr.Size > x.lim.MaxBytes {
		return opsapi.E("extract", p, opsapi.ErrTooLarge, fmt.Errorf("the archive's files hold more than %d bytes", x.lim.MaxBytes))
	}
	x.bytes += hdr.Size
	if err := x.parent(p); err != nil {
		return x.failed(hdr.Name, err)
	}
	mode := hdr.FileInfo().Mode().Perm()
	if hdr.Size > bufferMax {
		err := x.d.Files.WriteFile(x.ctx, p, tr)
		return x.landed(x.index, hdr.Name, p, hdr.Size, mode, err)
	}
	buf := getBuffer(hdr.Size)
	if _, err := io.ReadFull(tr, buf); err != nil {
		putBuffer(buf)
		return x.streamErr(err)
	}
	done := make(chan struct{})
	x.inflight[name] = done
	index, entryName := x.index, hdr.Name
	x.g.Go(func() error {
		defer close(done)
		defer putBuffer(buf)
		err := x.d.Files.WriteFile(x.ctx, p, bytes.NewReader(buf))
		return x.landed(index, entryName, p, int64(len(buf)), mode, err)
	})
	return nil
}

// landed counts a file written with err, giving it its mode, or refuses
// it.
func (x *extraction) landed(index int, name, p string, size int64, mode fs.FileMode, err error) error {
	if err == nil && mode != 0o644 && x.d.Tree != nil {
		err = x.d.Tree.Chmod(x.ctx, p, mode)
	}
	if err != nil {
		return x.failedAt(index, name, err)
	}
	x.count(func(r *Report) { r.Files++; r.Bytes += size })
	return nil
}

func (x *extraction) count(f func(*Report)) {
	x.mu.Lock()
	f(&x.rep)
	x.mu.Unlock()
}

// buffers recycle the writers' buffers of more than smallFile bytes.
var buffers = sync.Pool{New: func() any { b := make([]byte, bufferMax); return &b }}

const smallFile = 64 << 10

func getBuffer(n int64) []byte {
	if n <= smallFile {
		return make([]byte, n)
	}
	return (*buffers.Get().(*[]byte))[:n]
}

func putBuffer(b []byte) {
	if cap(b) == bufferMax {
		b = b[:cap(b)]
		buffers.Put(&b)
	}
}

func (x *extraction) link(hdr *tar.Header, name, p string) error {
	if name == "." {
		x.refuse(hdr.Name, "a link cannot replace the destination directory")
		return nil
	}
	if x.d.Tree == nil {
		x.refuse(hdr.Name, "this workspace cannot make links")
		return nil
	}
	if why := x.linkOut(name, hdr.Linkname); why != "" {
		x.refuse(hdr.Name, "link to %q: %s", hdr.Linkname, why)
		return nil
	}
	if err := x.parent(p); err != nil {
		return x.failed(hdr.Name, err)
	}
	if err := x.d.Tree.Symlink(x.ctx, hdr.Linkname, p); err != nil {
		return x.failed(hdr.Name, err)
	}
	x.links[name] = true
	x.count(func(r *Report) { r.Links++ })
	return nil
}

// parent makes p's directory, which a tar need not list.
func (x *extraction) parent(p string) error {
	d := path.Dir(p)
	if d == path.Clean(x.dir) || x.made[d] {
		return nil
	}
	if err := x.d.Files.Mkdir(x.ctx, d); err != nil {
		return err
	}
	x.made[d] = true
	return nil
}

// failed refuses the entry when the workspace refused it alone (its
// policy, a name taken by another type), and ends the extraction on
// anything else (a full disk, a lost workspace, the caller gone).
func (x *extraction) failed(name string, err error) error {
	return x.failedAt(x.index, name, err)
}

func (x *extraction) failedAt(index int, name string, err error) error {
	switch opsapi.KindOf(err) {
	case opsapi.ErrDenied, opsapi.ErrPermission, opsapi.ErrExist, opsapi.ErrIsDir, opsapi.ErrNotDir, opsapi.ErrInvalid:
		x.refuseAt(index, name, err.Error())
		return nil
	}
	return err
}

// dirModes gives directories their modes, deepest first, so that a
// read-only directory did not stop its own entries from landing.
func (x *extraction) dirModes() error {
	if x.d.Tree == nil {
		return nil
	}
	slices.SortStableFunc(x.modes, func(a, b dirMode) int { return strings.Count(b.p, "/") - strings.Count(a.p, "/") })
	for _, m := range x.modes {
		if err := x.d.Tree.Chmod(x.ctx, m.p, m.mode); err != nil {
			if err := x.failed(m.p, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanName is an entry's name relative to the destination, or why it is
// refused: absolute, with a ".." element, or with a NUL.
func cleanName(name string) (string, string) {
	switch {
	case strings.IndexByte(name, 0) >= 0:
		return "", "the name contains a NUL byte"
	case path.IsAbs(name):
		return "", "absolute names are not allowed"
	case slices.Contains(strings.Split(name, "/"), ".."):
		return "", `names with a ".." element are not allowed`
	case name == "":
		return "", "empty name"
	}
	return path.Clean(name), ""
}

// throughLink says whether a directory on name's path is a link the
// archive made.
func (x *extraction) throughLink(name string) bool {
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if x.links[d] {
			return true
		}
	}
	return x.links[name]
}

// linkOut says why a link at name to target would lead out of the
// destination (or through another link the archive made, whose target
// would make the lexical answer wrong), "" when it stays inside.
func (x *extraction) linkOut(name, target string) string {
	switch {
	case target == "":
		return "empty target"
	case strings.IndexByte(target, 0) >= 0:
		return "the target contains a NUL byte"
	case path.IsAbs(target):
		return "absolute targets lead out of the destination"
	}
	var at []string
	if d := path.Dir(name); d != "." {
		at = strings.Split(d, "/")
	}
	parts := strings.Split(target, "/")
	for i, part := range parts {
		switch part {
		case "", ".":
		case "..":
			if len(at) == 0 {
				return "it leads out of the destination"
			}
			at = at[:len(at)-1]
		default:
			at = append(at, part)
			if i < len(parts)-1 && x.links[strings.Join(at, "/")] {
				return "it goes through a link the archive made"
			}
		}
	}
	return ""
}
