package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// Exec runs req.Command on the broker and streams its output, decoded, to
// req.Output as it arrives (serially, and never after Exec returns). When
// ctx ends, the connection's write side is closed (see streamCancel): the
// broker kills the command's whole process tree and still sends the
// output up to the kill and the real result, with Canceled set. If the
// broker cannot be heard from any more, Exec reports a Canceled (or, for a
// deadline, TimedOut) result of its own. Start failures (a missing Cwd,
// ...) come back as errors of their opsapi kind.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		// Not even sent: nothing ran.
		return opsapi.ExecResult{}, opsapi.E("client.Exec", "", nil, err)
	}
	if req.Timeout < 0 {
		return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrInvalid, errors.New("negative timeout"))
	}
	if req.Signals != nil {
		if req.TTY != nil {
			return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable, errNoTTYSignals)
		}
		return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable,
			errors.New("the exec route carries no signals; start a background process (StartProcess) to signal it"))
	}
	if req.TTY != nil {
		return w.execTTY(ctx, req)
	}
	reqCtx, sc := newStreamCancel(ctx)
	defer sc.close()
	hreq, err := w.execRequest(reqCtx, req)
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	hreq.Header.Set("Accept", "application/x-ndjson")
	resp, err := w.c.send(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return canceledResult(ctx, start), nil
		}
		return opsapi.ExecResult{}, err
	}
	final := false // the stream's last line is in: read its end, keep the connection
	defer func() { sc.closeBody(resp.Body, final) }()

	lines := newLineReader(resp.Body)
	var out []byte // decoded output, reused
	for {
		raw, err := lines.next()
		if err != nil {
			if ctx.Err() != nil {
				return canceledResult(ctx, start), nil
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable,
				fmt.Errorf("exec stream ended without an exit line: %w", err))
		}
		var line wire.AnyExecLine
		if data, ok := fastOutput(raw, &out); ok {
			line = wire.AnyExecLine{ExecLine: wire.ExecLine{Type: wire.LineOutput, Data: data}}
		} else if err := json.Unmarshal(raw, &line); err != nil {
			if ctx.Err() != nil {
				return canceledResult(ctx, start), nil
			}
			return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable,
				fmt.Errorf("malformed exec stream line: %w", err))
		}
		switch line.Type {
		case wire.LineOutput:
			if req.Output != nil && len(line.Data) > 0 {
				if _, err := req.Output.Write(line.Data); err != nil {
					// The caller cannot take more output; closing the
					// stream stops the command rather than let it run
					// unread.
					return opsapi.ExecResult{}, opsapi.E("client.Exec", "", nil, fmt.Errorf("writing output: %w", err))
				}
			}
		case wire.LineExit:
			final = true
			return line.ExecResult, nil
		case wire.LineError:
			final = true
			return opsapi.ExecResult{}, native(&wire.Problem{Status: resp.StatusCode, Code: line.Code, Detail: line.Detail})
		default:
			// Unknown line types are future extensions; skip them.
		}
	}
}

// The exact form of an output line as the broker writes it. Output is
// nearly all of an exec stream's bytes, so such lines skip the JSON
// decoder (which scans every byte twice) and go straight to base64.
var (
	outputPrefix = []byte(`{"type":"output","data":"`)
	outputSuffix = []byte(`"}`)
)

// fastOutput decodes raw when it is an output line in the broker's exact
// form, into *buf (grown as needed); ok is false for anything else, which
// the JSON decoder then handles.
func fastOutput(raw []byte, buf *[]byte) (data []byte, ok bool) {
	if !bytes.HasPrefix(raw, outputPrefix) || !bytes.HasSuffix(raw, outputSuffix) ||
		len(raw) < len(outputPrefix)+len(outputSuffix) {
		return nil, false
	}
	enc := raw[len(outputPrefix) : len(raw)-len(outputSuffix)]
	if bytes.IndexByte(enc, '\\') >= 0 || bytes.IndexByte(enc, '"') >= 0 {
		return nil, false // JSON escapes: leave it to the decoder
	}
	n := base64.StdEncoding.DecodedLen(len(enc))
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode((*buf)[:n], enc)
	if err != nil {
		return nil, false
	}
	return (*buf)[:n], true
}

// maxStreamLine bounds one NDJSON line, so a broken or hostile peer cannot
// make the client buffer without limit; the broker's lines stay under
// 64 KiB.
const maxStreamLine = 16 << 20

// lineReader splits an NDJSON stream into lines without their newline,
// skipping empty ones.
type lineReader struct {
	br   *bufio.Reader
	long []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line; it is valid until the following call. At the
// end of the stream it returns io.EOF (a last line without a newline is
// still returned first).
func (l *lineReader) next() ([]byte, error) {
	for {
		line, err := l.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			l.long = append(l.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(l.long) > maxStreamLine {
					return nil, fmt.Errorf("stream line longer than %d bytes", maxStreamLine)
				}
				line, err = l.br.ReadSlice('\n')
				l.long = append(l.long, line...)
			}
			line = l.long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err // a broken stream: a partial line is no line
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// canceledResult is what Exec reports when ctx ended before the broker's
// exit line arrived: closing the request made the broker kill the tree,
// whose own exit status can no longer reach us. It reports the SIGTERM
// that a kill starts with, as a local backend would for a command that
// obeys it.
func canceledResult(ctx context.Context, start time.Time) opsapi.ExecResult {
	res := opsapi.ExecResult{Duration: time.Since(start), ExitCode: 128 + 15, Signal: "SIGTERM"}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.TimedOut = true
	} else {
		res.Canceled = true
	}
	return res
}

// execRequest is POST /exec for req: a JSON body, or with req.Stdin the
// command in the query and stdin as the body.
func (w *Workspace) execRequest(ctx context.Context, req opsapi.ExecRequest) (*http.Request, error) {
	body := wire.ExecRequest{Command: req.Command, Cwd: req.Cwd, Env: req.Env, Timeout: req.Timeout.Seconds()}
	if req.Stdin != nil {
		q := url.Values{"command": {body.Command}}
		if body.Cwd != "" {
			q.Set("cwd", body.Cwd)
		}
		if body.Timeout > 0 {
			q.Set("timeout", strconv.FormatFloat(body.Timeout, 'f', -1, 64))
		}
		q["env"] = body.Env
		hreq, err := w.c.newRequest(ctx, http.MethodPost, wsPath(w.id, "/exec"), q, io.NopCloser(req.Stdin))
		if err != nil {
			return nil, err
		}
		hreq.Header.Set("Content-Type", "application/octet-stream")
		return hreq, nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, opsapi.E("client.Exec", "", opsapi.ErrInvalid, err)
	}
	hreq, err := w.c.newRequest(ctx, http.MethodPost, wsPath(w.id, "/exec"), nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	return hreq, nil
}
