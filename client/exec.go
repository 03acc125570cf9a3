package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// execBody is the wire form of an opsapi.ExecRequest; the timeout travels
// as seconds.
type execBody struct {
	Command string   `json:"command"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"`
	Timeout float64  `json:"timeout,omitempty"`
}

// execLine is one line of the exec stream: output, exit or error.
type execLine struct {
	Type string `json:"type"`
	// output
	Data []byte `json:"data,omitempty"` // base64 on the wire
	// exit
	opsapi.ExecResult
	// error
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

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
	b, err := json.Marshal(execBody{Command: req.Command, Cwd: req.Cwd, Env: req.Env, Timeout: req.Timeout.Seconds()})
	if err != nil {
		return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrInvalid, err)
	}
	reqCtx, sc := newStreamCancel(ctx)
	defer sc.close()
	hreq, err := w.c.newRequest(reqCtx, http.MethodPost, wsPath(w.id, "/exec"), nil, bytes.NewReader(b))
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/x-ndjson")
	resp, err := w.c.send(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return canceledResult(ctx, start), nil
		}
		return opsapi.ExecResult{}, err
	}
	defer resp.Body.Close()
	sc.began()

	dec := json.NewDecoder(resp.Body)
	for {
		var line execLine
		if err := dec.Decode(&line); err != nil {
			if ctx.Err() != nil {
				return canceledResult(ctx, start), nil
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable,
				fmt.Errorf("exec stream ended without an exit line: %w", err))
		}
		switch line.Type {
		case "output":
			if req.Output != nil && len(line.Data) > 0 {
				if _, err := req.Output.Write(line.Data); err != nil {
					// The caller cannot take more output; closing the
					// stream stops the command rather than let it run
					// unread.
					return opsapi.ExecResult{}, opsapi.E("client.Exec", "", nil, fmt.Errorf("writing output: %w", err))
				}
			}
		case "exit":
			return line.ExecResult, nil
		case "error":
			return opsapi.ExecResult{}, native(&Problem{Status: resp.StatusCode, Code: line.Code, Detail: line.Detail})
		default:
			// Unknown line types are future extensions; skip them.
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
