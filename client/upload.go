package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// abortGrace bounds the wait for the broker's answer to an aborted upload
// before the connection is dropped outright.
const abortGrace = 10 * time.Second

// stuckWriteGrace bounds how long a canceled upload waits for the
// transport to come back for more body (it is writing meanwhile) before
// the request is canceled outright.
const stuckWriteGrace = time.Second

// WriteFile replaces path with what r yields, streamed as the request body
// (never buffered whole). If r fails, or ctx ends, before r is drained,
// the upload is aborted so that the broker discards it and the old file
// stays; the reader's (or the context's) error is returned.
//
// The abort is synchronous: WriteFile half-closes the connection, which
// the broker reads as a truncated body, and returns only once the broker
// has answered, that is once its write has failed and cleaned up. So a
// caller that looks at the directory right after sees no temporary file,
// as with a local backend. (Over HTTP/2, or when the connection cannot be
// half-closed, the request is simply canceled.)
func (w *Workspace) WriteFile(ctx context.Context, path string, r io.Reader) error {
	const op = "client.WriteFile"
	if err := ctx.Err(); err != nil {
		return opsapi.E(op, path, nil, err)
	}
	// The request does not end with ctx: the upload's own watcher turns
	// ctx's end into the half-close, and hardAbort is the last resort.
	reqCtx, hardAbort := context.WithCancel(context.WithoutCancel(ctx))
	defer hardAbort()
	up := &upload{r: r, hardAbort: hardAbort, done: make(chan struct{})}
	reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { up.setConn(info.Conn) },
	})
	stopWatch := context.AfterFunc(ctx, func() { up.fail(ctx.Err()) })
	defer stopWatch()

	// up has no Close method, so the transport never closes the caller's r.
	req, err := w.c.newRequest(reqCtx, http.MethodPut, wsPath(w.id, "/files"), pathQuery(path), up)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if l, ok := r.(interface{ Len() int }); ok && l.Len() > 0 {
		// An in-memory body of known size (bytes.Reader, strings.Reader,
		// bytes.Buffer) goes with its length rather than chunked: a
		// small file then leaves in the same write as the headers.
		req.ContentLength = int64(l.Len())
	}
	resp, err := w.c.hc.Do(req)
	up.finish()
	if uerr := up.failure(); uerr != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return opsapi.E(op, path, nil, uerr)
	}
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return ToNative(resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

var errUploadOver = errors.New("upload answered before its body was sent")

// upload is WriteFile's request body: the caller's reader, plus the
// abort protocol.
type upload struct {
	r         io.Reader
	hardAbort context.CancelFunc
	done      chan struct{} // closed once the response is in, or the request failed

	failed atomic.Bool // fast check on every Read
	once   sync.Once

	mu         sync.Mutex
	conn       net.Conn
	err        error
	reading    bool // the transport waits in Read, so it is not writing
	halfClosed bool
	timer      *time.Timer
}

func (u *upload) setConn(c net.Conn) {
	u.mu.Lock()
	u.conn = c
	u.mu.Unlock()
}

func (u *upload) Read(p []byte) (int, error) {
	if u.failed.Load() {
		return 0, u.abortFromRead()
	}
	select {
	case <-u.done:
		// The broker answered early (413, say) and WriteFile has returned:
		// the caller's reader is theirs again.
		return 0, errUploadOver
	default:
	}
	u.mu.Lock()
	u.reading = true
	u.mu.Unlock()
	n, err := u.r.Read(p)
	u.mu.Lock()
	u.reading = false
	u.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) {
		u.fail(err)
		return 0, u.abortFromRead()
	}
	if u.failed.Load() { // ctx ended during the read: send nothing more
		return 0, u.abortFromRead()
	}
	return n, err
}

// fail records the first failure. The half-close must not race a write of
// the transport on the same connection, so it happens at once only while
// the transport waits in Read (inside the caller's reader), which is
// where it does not write; otherwise the next Read does it, and if none
// comes soon (the transport is stuck writing) the request is canceled.
func (u *upload) fail(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err != nil {
		return
	}
	u.err = err
	u.failed.Store(true)
	switch {
	case u.reading:
		u.halfCloseLocked()
	case u.conn == nil:
		// Nothing sent yet: there is nothing for the broker to discard.
		u.hardAbort()
	default:
		u.timer = time.AfterFunc(stuckWriteGrace, u.hardAbort)
	}
}

// abortFromRead runs on the transport's write goroutine after a failure:
// half-close (if not done yet) and wait for the broker's answer.
func (u *upload) abortFromRead() error {
	u.mu.Lock()
	u.halfCloseLocked()
	u.mu.Unlock()
	return u.wait()
}

// halfCloseLocked ends the request body on the wire so that the broker
// reads a truncated body and answers; without a half-closable connection
// it cancels the request instead.
func (u *upload) halfCloseLocked() {
	if u.halfClosed {
		return
	}
	u.halfClosed = true
	if u.timer != nil {
		u.timer.Stop()
	}
	if canHalfClose(u.conn) {
		if err := u.conn.(interface{ CloseWrite() error }).CloseWrite(); err == nil {
			u.timer = time.AfterFunc(abortGrace, u.hardAbort)
			return
		}
	}
	u.hardAbort()
}

// canHalfClose reports whether closing c's write side ends this request's
// body alone: true for an HTTP/1 connection over TCP or TLS, false for a
// multiplexed HTTP/2 connection.
func canHalfClose(c net.Conn) bool {
	if c == nil {
		return false
	}
	if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		return false
	}
	_, ok := c.(interface{ CloseWrite() error })
	return ok
}

// wait blocks a failed Read until the broker has answered (so the
// transport does not drop the connection before the answer arrives), then
// returns the failure.
func (u *upload) wait() error {
	<-u.done
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// finish marks the response as in: a Read waiting in wait returns.
func (u *upload) finish() {
	u.once.Do(func() {
		close(u.done)
		u.mu.Lock()
		if u.timer != nil {
			u.timer.Stop()
		}
		u.mu.Unlock()
	})
}

func (u *upload) failure() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}
