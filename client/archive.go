package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// archiveTrailer is broker.ArchiveReportTrailer (the client does not
// import the server).
const archiveTrailer = "Wsbroker-Archive-Report"

// UploadArchive lands the tar stream r (plain, gzip or zstd, recognised
// by its first bytes) in directory dir, made if missing, and says what
// landed and which entries were refused, and why. r is streamed as the
// request body; if it fails, the upload fails (what landed before
// stays).
func (w *Workspace) UploadArchive(ctx context.Context, dir string, r io.Reader) (wire.ArchiveReport, error) {
	var rep wire.ArchiveReport
	// io.NopCloser: the transport must not close the caller's reader.
	req, err := w.c.newRequest(ctx, http.MethodPut, wsPath(w.id, "/archive"), pathQuery(dir), io.NopCloser(r))
	if err != nil {
		return rep, err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	req.Header.Set("Accept", "application/json")
	resp, err := w.c.send(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return rep, decodeError(ctx, req.Method, req.URL.Path, err)
	}
	return rep, nil
}

// Archive is a directory coming out of a workspace as a tar.
type Archive struct {
	body io.ReadCloser
	resp *http.Response
	ctx  context.Context
}

// DownloadArchive streams directory dir as a tar, compressed as
// compression ("" or "none", "gzip", "zstd"). Read it to its end, then
// Report says what it holds and what was left out. A stream the broker
// broke (a limit, a failing workspace) fails Read with ErrUnavailable.
func (w *Workspace) DownloadArchive(ctx context.Context, dir, compression string) (*Archive, error) {
	q := pathQuery(dir)
	if compression != "" {
		q.Set("compression", compression)
	}
	req, err := w.c.newRequest(ctx, http.MethodGet, wsPath(w.id, "/archive"), q, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.c.send(req) //nolint:bodyclose // the Archive owns the body; its Close closes it
	if err != nil {
		return nil, err
	}
	return &Archive{body: resp.Body, resp: resp, ctx: ctx}, nil
}

// Read reads the tar.
func (a *Archive) Read(p []byte) (int, error) {
	n, err := a.body.Read(p)
	if err != nil && err != io.EOF {
		err = transportError(a.ctx, fmt.Errorf("the archive stream broke: %w", err))
	}
	return n, err
}

// Close ends the download.
func (a *Archive) Close() error { return a.body.Close() }

// Report is the broker's report, known once the tar has been read to its
// end.
func (a *Archive) Report() (wire.ArchiveReport, error) {
	var rep wire.ArchiveReport
	raw := a.resp.Trailer.Get(archiveTrailer)
	if raw == "" {
		return rep, opsapi.E("client.Archive", "", opsapi.ErrInvalid, fmt.Errorf("no report: read the archive to its end first"))
	}
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		return rep, opsapi.E("client.Archive", "", opsapi.ErrUnavailable, fmt.Errorf("decoding the report: %w", err))
	}
	return rep, nil
}
