package broker

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/broker/httpguard"
)

func (res opsResource) getFile(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "read")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	rc, redacted, err := s.svc.Open(serviceCtx(r), wk, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	// Fill the first buffer before committing to 200: a failure that shows
	// only on read (a directory on some backends) is still a problem, and
	// a file that fits goes out in one write with its Content-Length
	// (unless redaction changed its length).
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	n, err := io.ReadFull(rc, buf)
	whole := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if err != nil && !whole {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if whole && !redacted {
		w.Header().Set("Content-Length", strconv.Itoa(n))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf[:n]); err != nil || whole {
		return // done, or the client left
	}
	if _, err := io.CopyBuffer(w, rc, buf); err != nil {
		// The status is sent; breaking the stream is the only way to tell
		// the client that what it got is incomplete.
		s.logger.Warn("file stream broken", "request_id", middleware.GetReqID(r.Context()),
			"workspace", wk.ID(), "err", err)
		panic(http.ErrAbortHandler)
	}
}

// copyBuffers recycles the file-read buffers: many small reads at once
// should not each allocate 32 KiB for the collector.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// uploadBody remembers that the upload overflowed, whatever the backend
// makes of the read error.
type uploadBody struct {
	r        io.Reader
	overflow error
}

func (u *uploadBody) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	var maxBytes *http.MaxBytesError
	if err != nil && errors.As(err, &maxBytes) {
		u.overflow = err
	}
	return n, err
}

func (res opsResource) putFile(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "write")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	mkdirs, err := boolParam(r, "mkdirs", "write")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	body := &uploadBody{r: r.Body}
	err = s.svc.WriteFile(serviceCtx(r), wk, p, body, mkdirs)
	if body.overflow != nil {
		err = fmt.Errorf("upload of %s is larger than %d bytes: %w", p, s.cfg.MaxUploadBytes, body.overflow)
	}
	if pb := httpguard.PacerFrom(r.Context()); pb != nil && pb.Slow() != nil {
		err = fmt.Errorf("%w: upload of %s: %w", ErrBadRequest, p, pb.Slow())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
