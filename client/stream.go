package client

import (
	"context"
	"io"
	"net"
	"net/http/httptrace"
	"sync"
	"time"
)

// streamAbortGrace bounds how long a canceled streaming call waits for the
// broker to finish it (kill the command, send the rest of the output and
// the final line) before the connection is dropped.
const streamAbortGrace = 15 * time.Second

// streamCancel lets a streaming call (exec, a streamed tool call) be
// canceled without losing its end. The request runs on a context that
// outlives the caller's; when the caller's context ends after the request
// has been written in full, the connection's write side is closed. The broker reads
// that as the client going away, cancels the call (killing the command's
// tree) and still sends what it produced up to the end, including the
// final line with the real result, over the half that stays open.
// Before the request is written, or when the connection cannot be
// half-closed (HTTP/2), the request is simply canceled.
type streamCancel struct {
	hardAbort context.CancelFunc
	stopWatch func() bool

	mu      sync.Mutex
	conn    net.Conn
	written bool // the whole request is on the wire: the transport writes no more
	done    bool
	timer   *time.Timer
}

// newStreamCancel returns the context to send the request with.
func newStreamCancel(ctx context.Context) (context.Context, *streamCancel) {
	reqCtx, hardAbort := context.WithCancel(context.WithoutCancel(ctx))
	sc := &streamCancel{hardAbort: hardAbort}
	reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			sc.mu.Lock()
			sc.conn = info.Conn
			sc.mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			sc.mu.Lock()
			sc.written = info.Err == nil
			sc.mu.Unlock()
		},
	})
	sc.stopWatch = context.AfterFunc(ctx, sc.cancel)
	return reqCtx, sc
}

func (sc *streamCancel) cancel() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.done {
		return
	}
	if sc.written && canHalfClose(sc.conn) {
		if err := sc.conn.(interface{ CloseWrite() error }).CloseWrite(); err == nil {
			sc.timer = time.AfterFunc(streamAbortGrace, sc.hardAbort)
			return
		}
	}
	sc.hardAbort()
}

// close releases the call's context and timers; call it when the response
// has been read.
func (sc *streamCancel) close() {
	sc.stopWatch()
	sc.mu.Lock()
	sc.done = true
	if sc.timer != nil {
		sc.timer.Stop()
	}
	sc.mu.Unlock()
	sc.hardAbort()
}

// drainGrace bounds the wait for the end of a stream whose final line has
// arrived; the broker ends it as soon as the call's record is written.
const drainGrace = time.Second

// maxDrain bounds what is read past a stream's final line.
const maxDrain = 64 << 10

// closeBody closes a stream's body. When its final line has been read
// (final), it first reads the stream's end (the chunked encoding's last
// chunk follows the final line): a body closed before its end costs the
// connection, and the next call a new one. Otherwise it closes at once,
// so the broker sees the client gone and stops the call.
func (sc *streamCancel) closeBody(body io.ReadCloser, final bool) {
	if final {
		t := time.AfterFunc(drainGrace, sc.hardAbort)
		_, _ = io.CopyN(io.Discard, body, maxDrain)
		t.Stop()
	}
	_ = body.Close()
}
