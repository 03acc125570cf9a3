package tarball

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/wsbroker/wsbroker/opsapi"
)

// MaxRedacted bounds a file Write must hold whole to learn its length
// (Source.Exact false).
const MaxRedacted = 16 << 20

// Source is what Write reads: paths as the workspace's operations take
// them.
type Source struct {
	// ReadDir lists a directory (links flagged, Type their target's).
	ReadDir func(ctx context.Context, p string) ([]opsapi.FileInfo, error)
	// Open opens a file.
	Open func(ctx context.Context, p string) (io.ReadCloser, error)
	// Exact says Open gives exactly the bytes ReadDir's size says. False
	// (a policy that redacts) makes Write read each file whole first, up
	// to MaxRedacted.
	Exact bool
	// Tree reads links; nil leaves them out (reported).
	Tree opsapi.TreeOperations
}

// Write streams directory dir as a tar compressed with c: files,
// directories (permission bits kept) and links as links, names relative
// to dir, in name order. What cannot be read (a denied or vanished file,
// a device, a socket) is left out and reported. Exceeding a limit, or a
// failing workspace or writer, ends the stream with an error; the caller
// must then break it, so the client cannot take it for a whole archive.
func Write(ctx context.Context, w io.Writer, c Compression, src Source, dir string, lim Limits) (Report, error) {
	zw, end, err := compress(w, c)
	if err != nil {
		return Report{}, err
	}
	wr := &writer{ctx: ctx, src: src, tw: tar.NewWriter(zw), lim: lim}
	if err := wr.dir(dir, ""); err != nil {
		return wr.rep, err
	}
	if err := wr.tw.Close(); err != nil {
		return wr.rep, err
	}
	return wr.rep, end()
}

type writer struct {
	ctx     context.Context
	src     Source
	tw      *tar.Writer
	lim     Limits
	rep     Report
	entries int
}

func (wr *writer) leave(name, format string, args ...any) {
	wr.rep.Refused = append(wr.rep.Refused, Refusal{Name: name, Reason: fmt.Sprintf(format, args...)})
}

// dir writes the entries of p, named under rel.
func (wr *writer) dir(p, rel string) error {
	list, err := wr.src.ReadDir(wr.ctx, p)
	if err != nil {
		if rel == "" {
			return err
		}
		return wr.skip(rel, err)
	}
	slices.SortFunc(list, func(a, b opsapi.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	// Files are read ahead a run at a time: the entries up to the next
	// directory, so that at most writers buffers are held however deep
	// the tree.
	var ahead *readAhead
	defer func() { ahead.stop() }()
	for i, e := range list {
		if e.Type != opsapi.TypeDir || e.Symlink {
			if ahead == nil || i >= ahead.end {
				ahead.stop()
				ahead = wr.readAhead(p, list, i)
			}
		}
		name := path.Join(rel, e.Name)
		if wr.entries++; wr.entries > wr.lim.MaxEntries {
			return opsapi.E("archive", p, opsapi.ErrTooLarge, fmt.Errorf("the directory has more than %d entries", wr.lim.MaxEntries))
		}
		full := path.Join(p, e.Name)
		var err error
		switch {
		case e.Symlink:
			err = wr.link(full, name)
		case e.Type == opsapi.TypeDir:
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(e.Mode.Perm()), ModTime: e.ModTime, Format: tar.FormatPAX}
			if err = wr.tw.WriteHeader(hdr); err == nil {
				wr.rep.Dirs++
				err = wr.dir(full, name)
			}
		case e.Type == opsapi.TypeFile && ahead.has(i):
			if f := ahead.take(i); f.more {
				putBuffer(f.buf)
				err = wr.file(full, name, e) // grew past the buffer: streamed
			} else {
				err = wr.fetched(name, e, f)
			}
		case e.Type == opsapi.TypeFile:
			err = wr.file(full, name, e)
		default:
			wr.leave(name, "not a file, directory or link")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// skip reports an entry the workspace would not give (denied, vanished,
// unreadable) and goes on; anything else ends the stream.
func (wr *writer) skip(name string, err error) error {
	switch opsapi.KindOf(err) {
	case opsapi.ErrDenied, opsapi.ErrPermission, opsapi.ErrNotExist, opsapi.ErrNotDir, opsapi.ErrIsDir, opsapi.ErrInvalid:
		wr.leave(name, "%v", err)
		return nil
	}
	return err
}

func (wr *writer) link(full, name string) error {
	if wr.src.Tree == nil {
		wr.leave(name, "this workspace cannot read links")
		return nil
	}
	target, err := wr.src.Tree.Readlink(wr.ctx, full)
	if err != nil {
		return wr.skip(name, err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, Format: tar.FormatPAX}
	if err := wr.tw.WriteHeader(hdr); err != nil {
		return err
	}
	wr.rep.Links++
	return nil
}

// fetched writes a file read ahead.
func (wr *writer) fetched(name string, e opsapi.FileInfo, f *fetch) error {
	defer putBuffer(f.buf)
	if f.err != nil {
		return wr.skip(name, f.err)
	}
	size := int64(len(f.buf))
	if wr.rep.Bytes+size > wr.lim.MaxBytes {
		return opsapi.E("archive", name, opsapi.ErrTooLarge, fmt.Errorf("the directory's files hold more than %d bytes", wr.lim.MaxBytes))
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: int64(e.Mode.Perm()), ModTime: e.ModTime, Format: tar.FormatPAX}
	if err := wr.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := wr.tw.Write(f.buf); err != nil {
		return err
	}
	wr.rep.Files++
	wr.rep.Bytes += size
	return nil
}

func (wr *writer) file(full, name string, e opsapi.FileInfo) error {
	rc, err := wr.src.Open(wr.ctx, full)
	if err != nil {
		return wr.skip(name, err)
	}
	defer rc.Close()
	size, body := e.Size, io.Reader(rc)
	if !wr.src.Exact {
		b, err := io.ReadAll(io.LimitReader(rc, MaxRedacted+1))
		if err != nil {
			return err
		}
		if len(b) > MaxRedacted {
			return opsapi.E("archive", full, opsapi.ErrTooLarge, fmt.Errorf("over %d bytes: too large to redact", MaxRedacted))
		}
		size, body = int64(len(b)), bytes.NewReader(b)
	}
	if wr.rep.Bytes+size > wr.lim.MaxBytes {
		return opsapi.E("archive", full, opsapi.ErrTooLarge, fmt.Errorf("the directory's files hold more than %d bytes", wr.lim.MaxBytes))
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: int64(e.Mode.Perm()), ModTime: e.ModTime, Format: tar.FormatPAX}
	if err := wr.tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that shrank since it was listed is padded, one that grew
	// cut: the header is already out.
	n, err := io.Copy(wr.tw, io.LimitReader(body, size))
	if err != nil {
		return err
	}
	if n < size {
		if _, err := io.CopyN(wr.tw, zeros{}, size-n); err != nil {
			return err
		}
		wr.leave(name, "it shrank while it was read: padded with zeros")
	}
	wr.rep.Files++
	wr.rep.Bytes += size
	return nil
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// readAhead reads the small files of one directory's listing (up to
// bufferMax each, as their sizes say) ahead of the tar, writers at a time,
// so that the workspace's per-file round trips overlap with one another
// and with the stream. Each buffer held is one a writer slot holds.
type readAhead struct {
	fetches []*fetch // by listing index; nil for entries not read ahead
	end     int      // the index after the run
	slots   chan struct{}
	quit    chan struct{}
	done    chan struct{}
}

// fetch is one file read ahead: buf, or why it could not be read; more
// says it holds more than bufferMax now.
type fetch struct {
	ready chan struct{}
	buf   []byte
	err   error
	more  bool
}

// readAhead starts reading the files of list's run from index from: up
// to the next directory.
func (wr *writer) readAhead(dir string, list []opsapi.FileInfo, from int) *readAhead {
	a := &readAhead{fetches: make([]*fetch, len(list)), slots: make(chan struct{}, writers),
		quit: make(chan struct{}), done: make(chan struct{}), end: len(list)}
	var todo []int
	for i := from; i < len(list); i++ {
		e := list[i]
		if e.Type == opsapi.TypeDir && !e.Symlink {
			a.end = i
			break
		}
		if !e.Symlink && e.Type == opsapi.TypeFile && e.Size <= bufferMax {
			a.fetches[i] = &fetch{ready: make(chan struct{})}
			todo = append(todo, i)
		}
	}
	go func() {
		defer close(a.done)
		for _, i := range todo {
			select {
			case a.slots <- struct{}{}:
			case <-a.quit:
				return
			}
			f, p := a.fetches[i], path.Join(dir, list[i].Name)
			go func() {
				defer close(f.ready)
				f.buf, f.more, f.err = wr.readWhole(p)
			}()
		}
	}()
	return a
}

func (a *readAhead) has(i int) bool { return a != nil && a.fetches[i] != nil }

// take waits for file i and gives its slot back.
func (a *readAhead) take(i int) *fetch {
	f := a.fetches[i]
	<-f.ready
	a.fetches[i] = nil
	<-a.slots
	return f
}

// stop ends the reading ahead and drops what was read and not taken.
func (a *readAhead) stop() {
	if a == nil {
		return
	}
	close(a.quit)
	<-a.done
	for _, f := range a.fetches {
		if f != nil {
			select {
			case <-f.ready:
				putBuffer(f.buf)
			default:
				// Never started, or still reading: its goroutine owns it.
			}
		}
	}
}

// readWhole reads the file at p into a buffer of at most bufferMax
// bytes; more says the file holds more than that now (it grew since it
// was listed, or the policy's redaction made it longer).
func (wr *writer) readWhole(p string) (buf []byte, more bool, err error) {
	rc, err := wr.src.Open(wr.ctx, p)
	if err != nil {
		return nil, false, err
	}
	defer rc.Close()
	buf = getBuffer(bufferMax)
	n, err := io.ReadFull(rc, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return buf[:n], false, nil
	case err != nil:
		putBuffer(buf)
		return nil, false, err
	}
	var one [1]byte
	m, _ := io.ReadFull(rc, one[:])
	return buf, m > 0, nil
}
