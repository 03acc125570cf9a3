package broker

import (
	"context"
	"net/http"
	"strconv"

	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// processLogs streams a background process's output as NDJSON from
// ?offset= (default 0) on: output lines with the offset of their first
// byte, a "dropped" line where the log no longer holds what was asked
// for, and a last line: "exit" or "error" once the process has ended,
// "end" (with the offset to resume from) when ?follow=true was not asked
// and it still runs. Following waits for new output until the process
// ends or the client leaves; leaving kills nothing.
func (res workspacesResource) processLogs(w http.ResponseWriter, r *http.Request) {
	s := res.s
	off := int64(0)
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, r, s.logger, invalid("logs", "", "query parameter \"offset\" must be a byte offset >= 0, got %q", v))
			return
		}
		off = n
	}
	follow, err := boolParam(r, "follow", "logs")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	p, ok := res.process(w, r)
	if !ok {
		return
	}
	out := &execStream{w: w}
	last := streamLog(r.Context(), p, off, follow, out.line)
	out.last(last)
}

// streamLog sends p's log from off through line and returns the last
// line to send (nil when the client left).
func streamLog(ctx context.Context, p *bgproc.Process, off int64, follow bool, line func(any)) any {
	log := p.Log()
	buf := make([]byte, execChunk)
	for {
		n, from, err := log.ReadAt(buf, off)
		if err != nil {
			return wire.LogLine{Type: wire.LineError, Offset: off, Code: "internal", Detail: err.Error()}
		}
		if from > off {
			line(wire.LogLine{Type: wire.LineDropped, Offset: off, Next: from})
			off = from
		}
		if n > 0 {
			line(wire.LogLine{Type: wire.LineOutput, Offset: off, Data: buf[:n]})
			off += int64(n)
			continue
		}
		if !follow && !log.Span().Closed {
			return wire.LogLine{Type: wire.LineEnd, Offset: off}
		}
		if err := log.Wait(ctx, off); err != nil && ctx.Err() != nil {
			return wire.LogLine{Type: wire.LineEnd, Offset: off}
		} else if err != nil {
			break // the log ended at off
		}
	}
	// The log closes just before the process records its end.
	<-p.Done()
	info := p.Info()
	if info.State == bgproc.Failed {
		_, code := ToHTTP(p.Err())
		return wire.LogLine{Type: wire.LineError, Offset: off, Code: code, Detail: info.Error}
	}
	return wire.LogLine{Type: wire.LineExit, Offset: off, Result: info.Result}
}
