package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// procPath is the path of background process id's sub-resource sub.
func (w *Workspace) procPath(id, sub string) string {
	return wsPath(w.id, "/processes/"+url.PathEscape(id)+sub)
}

// StartProcess starts a command in the background (POST /processes) and
// returns its handle at once.
func (w *Workspace) StartProcess(ctx context.Context, req wire.StartProcessRequest) (wire.BackgroundProcess, error) {
	var out wire.BackgroundProcess
	err := w.c.doJSON(ctx, http.MethodPost, wsPath(w.id, "/processes"), nil, req, &out)
	return out, err
}

// BackgroundProcesses lists the workspace's background processes, oldest
// first.
func (w *Workspace) BackgroundProcesses(ctx context.Context) ([]wire.BackgroundProcess, error) {
	var out wire.ProcessList
	err := w.c.doJSON(ctx, http.MethodGet, wsPath(w.id, "/processes"), nil, nil, &out)
	return out.Background, err
}

// Process describes background process id.
func (w *Workspace) Process(ctx context.Context, id string) (wire.BackgroundProcess, error) {
	var out wire.BackgroundProcess
	err := w.c.doJSON(ctx, http.MethodGet, w.procPath(id, ""), nil, nil, &out)
	return out, err
}

// RemoveProcess kills background process id's tree if it still runs,
// forgets it and deletes its log; it returns the process as it ended.
func (w *Workspace) RemoveProcess(ctx context.Context, id string) (wire.BackgroundProcess, error) {
	var out wire.BackgroundProcess
	err := w.c.doJSON(ctx, http.MethodDelete, w.procPath(id, ""), nil, nil, &out)
	return out, err
}

// WaitProcess waits up to timeoutSeconds (at most 600) for background
// process id to end and returns its state, still "running" when it did
// not end in time.
func (w *Workspace) WaitProcess(ctx context.Context, id string, timeoutSeconds float64) (wire.BackgroundProcess, error) {
	var out wire.BackgroundProcess
	q := url.Values{"timeout": {strconv.FormatFloat(timeoutSeconds, 'f', -1, 64)}}
	err := w.c.doJSON(ctx, http.MethodGet, w.procPath(id, "/wait"), q, nil, &out)
	return out, err
}

// SignalProcess sends a signal ("SIGINT", "SIGTERM", ...) to background
// process id's whole tree.
func (w *Workspace) SignalProcess(ctx context.Context, id, signal string) error {
	return w.c.doJSON(ctx, http.MethodPost, w.procPath(id, "/signal"), nil, wire.SignalRequest{Signal: signal}, nil)
}

// WriteStdin sends what r yields to background process id's stdin,
// closing it after when close is set, and returns the bytes the broker
// took.
func (w *Workspace) WriteStdin(ctx context.Context, id string, r io.Reader, close bool) (int64, error) {
	var q url.Values
	if close {
		q = url.Values{"close": {"true"}}
	}
	req, err := w.c.newRequest(ctx, http.MethodPost, w.procPath(id, "/stdin"), q, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := w.c.send(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out wire.StdinResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, decodeError(ctx, http.MethodPost, req.URL.Path, err)
	}
	return out.Written, nil
}

// CloseStdin closes background process id's stdin.
func (w *Workspace) CloseStdin(ctx context.Context, id string) error {
	return w.c.doJSON(ctx, http.MethodDelete, w.procPath(id, "/stdin"), nil, nil, nil)
}

// ProcessLogs reads background process id's output from offset on,
// handing each output and dropped line to fn in order, and returns the
// stream's last line: exit (with Result) or error once the process has
// ended, end (with the offset to resume from) when follow is false and it
// still runs. With follow it waits for output until the process ends.
// When the connection breaks, the error says so; resume from the offset
// after the last byte fn saw.
func (w *Workspace) ProcessLogs(ctx context.Context, id string, offset int64, follow bool, fn func(wire.LogLine) error) (wire.LogLine, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	if follow {
		q.Set("follow", "true")
	}
	req, err := w.c.newRequest(ctx, http.MethodGet, w.procPath(id, "/logs"), q, nil)
	if err != nil {
		return wire.LogLine{}, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := w.c.send(req)
	if err != nil {
		return wire.LogLine{}, err
	}
	defer resp.Body.Close()
	lines := newLineReader(resp.Body)
	for {
		raw, err := lines.next()
		if err != nil {
			if ctx.Err() != nil {
				return wire.LogLine{}, opsapi.E("client.ProcessLogs", "", nil, ctx.Err())
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return wire.LogLine{}, opsapi.E("client.ProcessLogs", "", opsapi.ErrUnavailable,
				fmt.Errorf("log stream ended without a last line: %w", err))
		}
		var line wire.LogLine
		if err := json.Unmarshal(raw, &line); err != nil {
			return wire.LogLine{}, opsapi.E("client.ProcessLogs", "", opsapi.ErrUnavailable,
				fmt.Errorf("malformed log stream line: %w", err))
		}
		switch line.Type {
		case wire.LineOutput, wire.LineDropped:
			if err := fn(line); err != nil {
				return wire.LogLine{}, err
			}
		case wire.LineExit, wire.LineEnd:
			return line, nil
		case wire.LineError:
			return line, native(&wire.Problem{Status: resp.StatusCode, Code: line.Code, Detail: line.Detail})
		}
	}
}
