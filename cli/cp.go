package cli

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tarball"
	"github.com/wsbroker/wsbroker/wire"
)

// cp copies a directory tree into or out of a workspace as one tar stream
// (PUT and GET /archive): `cp <dir> <ws>:<dir>` or `cp <ws>:<dir> <dir>`;
// "-" is a tar on stdin or stdout.
func (c *CLI) cp(ctx context.Context, args []string) error {
	fs := c.flagSet("cp", "[flags] <local dir|-> <ws>:<dir>  |  <ws>:<dir> <local dir|->")
	cf := c.addClientFlags(fs)
	compression := fs.String("compression", "gzip", "on the wire, downloading: none, gzip or zstd")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("cp takes a source and a destination, got %q", fs.Args())
	}
	src, dst := fs.Arg(0), fs.Arg(1)
	srcWS, srcDir, srcRemote := remoteArg(src)
	dstWS, dstDir, dstRemote := remoteArg(dst)
	if srcRemote == dstRemote {
		return usageError("cp copies between this machine and a workspace: exactly one of %q and %q must be <ws>:<dir>", src, dst)
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	var rep wire.ArchiveReport
	if dstRemote {
		rep, err = c.upload(ctx, cl.Workspace(dstWS), src, dstDir)
	} else {
		rep, err = c.download(ctx, cl.Workspace(srcWS), srcDir, dst, *compression)
	}
	if err != nil {
		return explain(err)
	}
	for _, r := range rep.Refused {
		fmt.Fprintf(c.Stderr, "broker cp: %s: %s\n", r.Name, r.Reason)
	}
	fmt.Fprintf(c.Stderr, "broker cp: %d files (%d bytes), %d directories, %d links; %d refused\n",
		rep.Files, rep.Bytes, rep.Dirs, rep.Links, len(rep.Refused))
	if len(rep.Refused) > 0 {
		return &exitError{code: exitFail}
	}
	return nil
}

// remoteArg splits "<ws>:<dir>"; a path with a slash before any colon is
// local.
func remoteArg(s string) (ws, dir string, ok bool) {
	ws, dir, ok = strings.Cut(s, ":")
	if !ok || ws == "" || strings.Contains(ws, "/") {
		return "", "", false
	}
	if dir == "" {
		dir = "."
	}
	return ws, dir, true
}

func (c *CLI) upload(ctx context.Context, ws *client.Workspace, local, dir string) (wire.ArchiveReport, error) {
	if local == "-" {
		return ws.UploadArchive(ctx, dir, c.Stdin)
	}
	if fi, err := os.Stat(local); err != nil || !fi.IsDir() {
		return wire.ArchiveReport{}, usageError("%s is not a directory", local)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarDir(local, pw)) }()
	rep, err := ws.UploadArchive(ctx, dir, pr)
	pr.CloseWithError(io.ErrClosedPipe) // stops the walk if the upload ended first
	return rep, err
}

// tarDir writes the tree under root as a tar: files, directories and
// links as links (never followed), names relative to root.
func tarDir(root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, devices, fifos stay here
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = "", "", 0, 0
		if err := tw.WriteHeader(hdr); err != nil || !info.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, info.Size())
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func (c *CLI) download(ctx context.Context, ws *client.Workspace, dir, local, compression string) (wire.ArchiveReport, error) {
	a, err := ws.DownloadArchive(ctx, dir, compression)
	if err != nil {
		return wire.ArchiveReport{}, err
	}
	defer a.Close()
	if local == "-" {
		if _, err := io.Copy(c.Stdout, a); err != nil {
			return wire.ArchiveReport{}, err
		}
		return a.Report()
	}
	if err := os.MkdirAll(local, 0o755); err != nil {
		return wire.ArchiveReport{}, err
	}
	root, err := os.OpenRoot(local)
	if err != nil {
		return wire.ArchiveReport{}, err
	}
	defer root.Close()
	// The same checks as a workspace's uploads: what the broker sends is
	// no more trusted than what an agent wrote.
	d := rootDest{root}
	got, err := tarball.Extract(ctx, a, tarball.Auto, tarball.Dest{Files: d, Tree: d}, ".",
		tarball.Limits{MaxEntries: math.MaxInt, MaxBytes: math.MaxInt64})
	if err != nil {
		return wire.ArchiveReport{}, err
	}
	if _, err := io.Copy(io.Discard, a); err != nil { // to the trailer
		return wire.ArchiveReport{}, err
	}
	rep, err := a.Report()
	for _, r := range got.Refused {
		rep.Refused = append(rep.Refused, wire.ArchiveRefusal{Name: r.Name, Reason: "not extracted here: " + r.Reason})
	}
	return rep, err
}

// rootDest lands a download's entries under a local directory, through
// os.Root so that nothing lands outside it.
type rootDest struct{ r *os.Root }

func (d rootDest) WriteFile(_ context.Context, p string, r io.Reader) error {
	f, err := d.r.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return osErr("write", p, err)
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return osErr("write", p, err)
}

func (d rootDest) Mkdir(_ context.Context, p string) error {
	return osErr("mkdir", p, d.r.MkdirAll(p, 0o755))
}

func (d rootDest) Symlink(_ context.Context, target, p string) error {
	return osErr("symlink", p, d.r.Symlink(target, p))
}

func (d rootDest) Readlink(_ context.Context, p string) (string, error) {
	t, err := d.r.Readlink(p)
	return t, osErr("readlink", p, err)
}

func (d rootDest) Chmod(_ context.Context, p string, mode fs.FileMode) error {
	return osErr("chmod", p, d.r.Chmod(p, mode))
}

// osErr classifies a local failure as the workspaces' are, so that
// tarball tells a refused entry from a failed extraction.
func osErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return opsapi.E(op, p, nil, err)
}
