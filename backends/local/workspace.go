package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/opsapi"
)

// copyBufSize is the buffer WriteFile copies through.
const copyBufSize = 32 << 10

// Open opens a regular file for reading. Symbolic links are followed
// inside the root; a link out is ErrPermission. A directory is ErrIsDir;
// devices, fifos and sockets are ErrInvalid (reading them could block or
// never end). The reader stops with ErrCanceled or ErrTimeout once ctx
// ends.
func (w *Workspace) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	const op = "local.Open"
	rel, err := w.rel(op, p)
	if err != nil {
		return nil, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	// O_NONBLOCK: opening a fifo must not hang; a regular file ignores it.
	f, err := w.fsroot.OpenFile(canon, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, mapErr(op, p, err)
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, opsapi.E(op, p, opsapi.ErrIsDir, nil)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, opsapi.E(op, p, opsapi.ErrInvalid, errors.New("not a regular file"))
	}
	return &ctxFile{ctx: ctx, f: f, op: "local.Read", path: p}, nil
}

// ctxFile is an open file whose reads fail once ctx ends.
type ctxFile struct {
	ctx  context.Context
	f    *os.File
	op   string
	path string
}

func (c *ctxFile) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, opsapi.E(c.op, c.path, nil, err)
	}
	n, err := c.f.Read(b)
	if err != nil && err != io.EOF {
		err = mapErr(c.op, c.path, err)
	}
	return n, err
}

func (c *ctxFile) Close() error { return c.f.Close() }

// ctxReader reads from r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// Access checks that p exists and that the workspace's user (the broker's
// user, who also runs the commands) may read or write it, with the
// kernel's own check (faccessat with AT_EACCESS), so it agrees with
// `test -r` / `test -w` in the workspace. As root that means a chmod 444
// file is writable, as it is for root's shell; pi's EACCES-on-444 case
// only arises when the broker runs unprivileged.
func (w *Workspace) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	const op = "local.Access"
	rel, err := w.rel(op, p)
	if err != nil {
		return err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return mapErr(op, p, err)
	}
	dir, base := path.Split(canon)
	if dir == "" {
		dir = "."
	}
	// The check runs on one name inside a directory opened through the
	// root, without following a link that may have been swapped in.
	d, err := w.fsroot.Open(dir)
	if err != nil {
		return mapErr(op, p, err)
	}
	defer d.Close()
	var how uint32
	if mode&opsapi.AccessRead != 0 {
		how |= unix.R_OK
	}
	if mode&opsapi.AccessWrite != 0 {
		how |= unix.W_OK
	}
	if how == 0 {
		how = unix.F_OK
	}
	check := unix.Faccessat(int(d.Fd()), base, how, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
	if check == nil && w.uid >= 0 {
		// Sandboxed, the answer is the workspace user's, not root's.
		check = accessAs(int(d.Fd()), base, how, w.uid)
	}
	if check != nil {
		return mapErr(op, p, &os.PathError{Op: "access", Path: p, Err: check})
	}
	return nil
}

// accessAs is access(2)'s answer for uid (whose only group is the equal
// gid) from the permission bits of base in the directory dirfd. A file
// the broker's own user placed in the workspace counts as uid's: the
// tools, which run as the broker, may change it, and it is the
// workspace's content.
func accessAs(dirfd int, base string, how uint32, uid int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	bits := st.Mode & 0o7 // others
	switch {
	case int(st.Uid) == uid || int(st.Uid) == os.Geteuid():
		bits = (st.Mode >> 6) & 0o7
	case int(st.Gid) == uid:
		bits = (st.Mode >> 3) & 0o7
	}
	if how&unix.R_OK != 0 && bits&0o4 == 0 || how&unix.W_OK != 0 && bits&0o2 == 0 {
		return unix.EACCES
	}
	return nil
}

// WriteFile replaces p atomically with what r yields: a temporary file
// `.<name>.tmp-<random>` is created beside the target (O_EXCL, through the
// root), filled, synced, given the existing file's mode (and owner, when
// the broker may set it), renamed over the target, and the directory is
// synced. A symbolic link at p inside the root is followed, so the link
// stays and its target is replaced, as writing through a link does. On any
// failure (r, ctx, the disk) the temporary file is removed and the target
// is untouched.
func (w *Workspace) WriteFile(ctx context.Context, p string, r io.Reader) error {
	const op = "local.WriteFile"
	rel, err := w.rel(op, p)
	if err != nil {
		return err
	}
	canon, err := w.resolve(rel, true, true)
	if err != nil {
		return mapErr(op, p, err)
	}
	if canon == "." {
		return opsapi.E(op, p, opsapi.ErrIsDir, nil)
	}
	perm := fs.FileMode(0o644)
	uid, gid := -1, -1
	fi, err := w.fsroot.Stat(canon)
	switch {
	case err == nil && fi.IsDir():
		return opsapi.E(op, p, opsapi.ErrIsDir, nil)
	case err == nil:
		perm = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return mapErr(op, p, err)
	}

	dir, base := path.Split(canon)
	if dir == "" {
		dir = "."
	}
	tmp := path.Join(dir, tempName(base))
	f, err := w.fsroot.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return mapErr(op, p, err)
	}
	fail := func(err error) error {
		f.Close()
		_ = w.fsroot.Remove(tmp)
		return mapErr(op, p, err)
	}
	if _, err := io.CopyBuffer(f, ctxReader{ctx, r}, make([]byte, copyBufSize)); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if fi == nil && w.uid >= 0 {
		// A new file is the sandbox user's, as if its command had made it.
		if err := f.Chown(w.uid, w.uid); err != nil {
			return fail(err)
		}
	}
	if fi != nil {
		if err := f.Chmod(perm); err != nil {
			return fail(err)
		}
		if uid != os.Geteuid() || gid != os.Getegid() {
			// Keep the owner where we may (root); elsewhere the file
			// becomes ours, as any rewrite by this user would.
			if err := f.Chown(uid, gid); err != nil && !errors.Is(err, fs.ErrPermission) {
				return fail(err)
			}
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = w.fsroot.Remove(tmp)
		return mapErr(op, p, err)
	}
	if err := w.fsroot.Rename(tmp, canon); err != nil {
		_ = w.fsroot.Remove(tmp)
		return mapErr(op, p, err)
	}
	// The rename is durable only once the directory is synced.
	if d, err := w.fsroot.Open(dir); err == nil {
		_ = d.Sync() // the new content is in place; a failure only risks durability
		d.Close()
	}
	return nil
}

// tempName is the name of WriteFile's temporary file for base, kept under
// NAME_MAX.
func tempName(base string) string {
	b := make([]byte, 8)
	rand.Read(b)
	if len(base) > 200 {
		base = base[:200]
	}
	return "." + base + ".tmp-" + hex.EncodeToString(b)
}

// Mkdir creates p and its missing parents. An existing directory is fine,
// an existing non-directory ErrExist, a file among the parents ErrNotDir.
func (w *Workspace) Mkdir(ctx context.Context, p string) error {
	const op = "local.Mkdir"
	rel, err := w.rel(op, p)
	if err != nil {
		return err
	}
	if canon, err := w.resolve(rel, true, false); err == nil {
		fi, err := w.fsroot.Stat(canon)
		if err == nil && !fi.IsDir() {
			return opsapi.E(op, p, opsapi.ErrExist, errors.New("exists and is not a directory"))
		}
		if err == nil {
			return nil
		}
	} else if isEscape(err) {
		return mapErr(op, p, err)
	}
	if err := w.fsroot.MkdirAll(rel, 0o755); err != nil {
		return mapErr(op, p, err)
	}
	return w.giveToSandbox(op, p, rel)
}

// giveToSandbox gives the directories along rel that the broker owns
// (those MkdirAll just made) to the workspace's sandbox user.
func (w *Workspace) giveToSandbox(op, p, rel string) error {
	if w.uid < 0 {
		return nil
	}
	for d := rel; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		fi, err := w.fsroot.Lstat(d)
		if err != nil {
			return mapErr(op, p, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		if err := w.fsroot.Lchown(d, w.uid, w.uid); err != nil {
			return mapErr(op, p, err)
		}
	}
	return nil
}

// Stat describes p, following symbolic links inside the root. A link that
// cannot be followed (dangling, looping or pointing out of the root) is
// described as itself with Type TypeSymlink.
func (w *Workspace) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	const op = "local.Stat"
	rel, err := w.rel(op, p)
	if err != nil {
		return opsapi.FileInfo{}, err
	}
	// Resolve the parents, then look at the last component itself.
	lcanon, err := w.resolve(rel, false, false)
	if err != nil {
		return opsapi.FileInfo{}, mapErr(op, p, err)
	}
	name := path.Base(opsapi.Resolve(w.root, p))
	fi, err := w.describe(lcanon, name)
	if err != nil {
		return opsapi.FileInfo{}, mapErr(op, p, err)
	}
	return fi, nil
}

// describe describes the canonical-parent path lcanon, following it if it
// is a link.
func (w *Workspace) describe(lcanon, name string) (opsapi.FileInfo, error) {
	lfi, err := w.fsroot.Lstat(lcanon)
	if err != nil {
		return opsapi.FileInfo{}, err
	}
	if lfi.Mode()&fs.ModeSymlink == 0 {
		return opsapi.NewFileInfo(name, lfi, false), nil
	}
	canon, err := w.resolve(lcanon, true, false)
	if err == nil {
		var fi fs.FileInfo
		if fi, err = w.fsroot.Stat(canon); err == nil {
			return opsapi.NewFileInfo(name, fi, true), nil
		}
	}
	return opsapi.NewFileInfo(name, lfi, true), nil
}

// ReadDir lists p (following links inside the root to get there), sorted
// by name, each entry described as Stat would.
func (w *Workspace) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	const op = "local.ReadDir"
	rel, err := w.rel(op, p)
	if err != nil {
		return nil, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	d, err := w.fsroot.Open(canon)
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil {
		return nil, mapErr(op, p, err)
	} else if !fi.IsDir() {
		return nil, opsapi.E(op, p, opsapi.ErrNotDir, nil)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	slices.Sort(names)
	out, err := w.describeEntries(ctx, d, canon, names)
	if err != nil {
		return nil, opsapi.E(op, p, nil, err)
	}
	return out, nil
}

// RealPath returns p's canonical absolute host path, every link resolved
// inside the root. A missing path is ErrNotExist, a link out of the root
// ErrPermission.
func (w *Workspace) RealPath(ctx context.Context, p string) (string, error) {
	const op = "local.RealPath"
	rel, err := w.rel(op, p)
	if err != nil {
		return "", err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return "", mapErr(op, p, err)
	}
	if canon == "." {
		return w.root, nil
	}
	return w.root + "/" + strings.TrimPrefix(canon, "./"), nil
}
