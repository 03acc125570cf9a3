package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tarball"
	"github.com/wsbroker/wsbroker/wire"
)

// Issue 20's rows: a whole tree in and out as one tar (Config.ArchiveBytes
// of files, 1 MiB each).
const (
	archiveUp   = "archive.up"
	archiveDown = "archive.down"
	archiveFile = 1 << 20
)

// archiver is the HTTP client's workspace: the broker's /archive routes.
type archiver interface {
	UploadArchive(ctx context.Context, dir string, r io.Reader) (wire.ArchiveReport, error)
	DownloadArchive(ctx context.Context, dir, compression string) (*client.Archive, error)
}

// archiveTars are the payloads by size, made once.
var archiveTars sync.Map // int64 -> []byte

// archiveTar is a tar of size bytes of files that do not compress.
func archiveTar(size int64) []byte {
	if b, ok := archiveTars.Load(size); ok {
		return b.([]byte)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	noise := content8M()
	for i := int64(0); i*archiveFile < size; i++ {
		n := min(archiveFile, size-i*archiveFile)
		hdr := &tar.Header{Name: fmt.Sprintf("d%02d/f%04d.bin", i/64, i), Mode: 0o644, Size: n, Typeflag: tar.TypeReg}
		_ = tw.WriteHeader(hdr)
		off := (i * archiveFile) % int64(len(noise)-archiveFile)
		_, _ = tw.Write(noise[off : off+n])
	}
	_ = tw.Close()
	b, _ := archiveTars.LoadOrStore(size, buf.Bytes())
	return b.([]byte)
}

var archiveLimits = tarball.Limits{MaxEntries: 1 << 20, MaxBytes: 1 << 40}

// archiveOps are the archive rows of a workspace: through the broker's
// routes when ws is the HTTP client's, else with package tarball over
// the workspace's own operations (what the broker does in-process).
func archiveOps(ws opsapi.Operations, cfg Config, i int) Client {
	dir := fmt.Sprintf("archive/c%03d", i)
	payload := func() io.Reader { return bytes.NewReader(archiveTar(cfg.ArchiveBytes)) }
	check := func(files int, bytes int64, refused int) error {
		if want := (cfg.ArchiveBytes + archiveFile - 1) / archiveFile; int64(files) != want || bytes != cfg.ArchiveBytes || refused != 0 {
			return fmt.Errorf("archive: %d files, %d bytes, %d refused; want %d files, %d bytes", files, bytes, refused, want, cfg.ArchiveBytes)
		}
		return nil
	}
	var seeded sync.Once
	var seedErr error
	up := func(ctx context.Context) error {
		if a, ok := ws.(archiver); ok {
			rep, err := a.UploadArchive(ctx, dir, payload())
			if err != nil {
				return err
			}
			return check(rep.Files, rep.Bytes, len(rep.Refused))
		}
		tree, _ := ws.(opsapi.TreeOperations)
		rep, err := tarball.Extract(ctx, payload(), tarball.None, tarball.Dest{Files: ws, Tree: tree}, dir, archiveLimits)
		if err != nil {
			return err
		}
		return check(rep.Files, rep.Bytes, len(rep.Refused))
	}
	down := func(ctx context.Context) error {
		if seeded.Do(func() { seedErr = up(ctx) }); seedErr != nil {
			return seedErr
		}
		if a, ok := ws.(archiver); ok {
			rc, err := a.DownloadArchive(ctx, dir, "none")
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(io.Discard, rc); err != nil {
				return err
			}
			rep, err := rc.Report()
			if err != nil {
				return err
			}
			return check(rep.Files, rep.Bytes, len(rep.Refused))
		}
		tree, _ := ws.(opsapi.TreeOperations)
		src := tarball.Source{ReadDir: ws.ReadDir, Open: ws.Open, Exact: true, Tree: tree}
		rep, err := tarball.Write(ctx, io.Discard, tarball.None, src, dir, archiveLimits)
		if err != nil {
			return err
		}
		return check(rep.Files, rep.Bytes, len(rep.Refused))
	}
	return Client{archiveUp: up, archiveDown: down}
}
