package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// CallTool runs the tool name with args (its JSON arguments; nil means {})
// on the broker, with pi's semantics. A tool failure is a Result with
// IsError set, not an error; errors are for an unknown workspace or tool
// (opsapi.ErrNotExist), a body that is not JSON, or a lost broker. When
// onUpdate is not nil the call streams: onUpdate receives the partial
// results (bash output as it comes), serially, before CallTool returns.
// Cancelling ctx stops the tool on the broker, which still answers with
// the tool's own result (bash: "Command aborted" after the output so far);
// only when the broker cannot be heard from any more is it an error of
// kind ErrCanceled or ErrTimeout.
func (w *Workspace) CallTool(ctx context.Context, name string, args json.RawMessage, onUpdate func(wire.ToolResult)) (wire.ToolResult, error) {
	if err := ctx.Err(); err != nil {
		return wire.ToolResult{}, opsapi.E("client.CallTool", "", nil, err)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	reqCtx, sc := newStreamCancel(ctx)
	defer sc.close()
	req, err := w.c.newRequest(reqCtx, http.MethodPost, wsPath(w.id, "/tools/"+url.PathEscape(name)), nil, bytes.NewReader(args))
	if err != nil {
		return wire.ToolResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if onUpdate == nil {
		req.Header.Set("Accept", "application/json")
	} else {
		req.Header.Set("Accept", "application/x-ndjson")
	}
	resp, err := w.c.send(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return wire.ToolResult{}, opsapi.E("client.CallTool", "", nil, cerr)
		}
		return wire.ToolResult{}, err
	}
	final := false // the last value is in: read the body's end, keep the connection
	defer func() { sc.closeBody(resp.Body, final) }()
	dec := json.NewDecoder(resp.Body)
	if onUpdate == nil {
		var res wire.ToolResult
		if err := dec.Decode(&res); err != nil {
			return wire.ToolResult{}, decodeError(ctx, req.Method, req.URL.Path, err)
		}
		final = true
		return res, nil
	}
	for {
		var line wire.AnyStreamLine
		if err := dec.Decode(&line); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return wire.ToolResult{}, decodeError(ctx, req.Method, req.URL.Path,
				fmt.Errorf("tool stream ended without a result line: %w", err))
		}
		switch line.Type {
		case wire.LineUpdate:
			onUpdate(line.Result)
		case wire.LineResult:
			final = true
			return line.Result, nil
		case wire.LineError:
			final = true
			return wire.ToolResult{}, native(&wire.Problem{Status: resp.StatusCode, Code: line.Code, Detail: line.Detail})
		}
	}
}

// Batch runs calls on the broker in mode (wire.Parallel or
// wire.Sequential; "" means the broker's default) and returns their
// results in source order.
// An unknown tool or invalid arguments give that call an isError result;
// the other calls still run.
func (w *Workspace) Batch(ctx context.Context, calls []wire.BatchCall, mode string) ([]wire.BatchResult, error) {
	for i := range calls {
		if len(calls[i].Arguments) == 0 {
			calls[i].Arguments = json.RawMessage("{}")
		}
	}
	body := wire.BatchRequest{Calls: calls, Mode: mode}
	var out wire.BatchResponse
	err := w.c.doJSON(ctx, http.MethodPost, wsPath(w.id, "/tools"), nil, body, &out)
	if err == nil && len(out.Results) != len(calls) {
		err = opsapi.E("client.Batch", "", opsapi.ErrUnavailable,
			fmt.Errorf("broker returned %d results for %d calls", len(out.Results), len(calls)))
	}
	return out.Results, err
}
