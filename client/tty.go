package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// execTTY runs req on a pseudo-terminal over the broker's WebSocket
// route (GET /exec/tty): req.Stdin is typed at the terminal, req.Output
// receives what it displays, req.Resize's sizes are sent as they come.
// Ending ctx closes the connection, which kills the command's tree; the
// result is then Canceled (or TimedOut) as Exec's.
func (w *Workspace) execTTY(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	start := time.Now()
	q := url.Values{"command": {req.Command},
		"rows": {strconv.Itoa(int(req.TTY.Rows))}, "cols": {strconv.Itoa(int(req.TTY.Cols))}}
	if req.Cwd != "" {
		q.Set("cwd", req.Cwd)
	}
	if req.Timeout > 0 {
		q.Set("timeout", strconv.FormatFloat(req.Timeout.Seconds(), 'f', -1, 64))
	}
	q["env"] = req.Env
	h := http.Header{}
	if w.c.token != "" {
		h.Set("Authorization", "Bearer "+w.c.token)
	}
	conn, resp, err := websocket.Dial(ctx, w.c.base+wsPath(w.id, "/exec/tty")+"?"+q.Encode(),
		&websocket.DialOptions{HTTPClient: w.c.hc, HTTPHeader: h})
	if resp != nil && resp.Body != nil {
		// The library holds the upgraded connection; closing the body of
		// the handshake's answer is harmless and keeps nothing open.
		defer resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			return opsapi.ExecResult{}, ToNative(resp)
		}
		return opsapi.ExecResult{}, transportError(ctx, err)
	}
	defer func() { _ = conn.CloseNow() }()
	conn.SetReadLimit(1 << 20)
	stop := make(chan struct{})
	defer close(stop)
	go sendTTYInput(ctx, conn, req, stop)
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return canceledResult(ctx, start), nil
			}
			return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable,
				fmt.Errorf("terminal session ended without an exit line: %w", err))
		}
		if typ == websocket.MessageBinary {
			if req.Output != nil {
				if _, err := req.Output.Write(data); err != nil {
					return opsapi.ExecResult{}, opsapi.E("client.Exec", "", nil, fmt.Errorf("writing output: %w", err))
				}
			}
			continue
		}
		var line wire.AnyExecLine
		if err := json.Unmarshal(data, &line); err != nil {
			return opsapi.ExecResult{}, opsapi.E("client.Exec", "", opsapi.ErrUnavailable, fmt.Errorf("malformed terminal message: %w", err))
		}
		switch line.Type {
		case wire.LineExit:
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return line.ExecResult, nil
		case wire.LineError:
			return opsapi.ExecResult{}, native(&wire.Problem{Status: http.StatusOK, Code: line.Code, Detail: line.Detail})
		}
	}
}

// sendTTYInput sends req.Stdin's bytes and req.Resize's sizes until stop.
// It may leave one Read of req.Stdin blocked (the caller's to unblock).
func sendTTYInput(ctx context.Context, conn *websocket.Conn, req opsapi.ExecRequest, stop <-chan struct{}) {
	if req.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := req.Stdin.Read(buf)
				if n > 0 && conn.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
					return
				}
				if err != nil {
					return // a terminal has no end of input: stop typing
				}
			}
		}()
	}
	for {
		select {
		case <-stop:
			return
		case size, ok := <-req.Resize:
			if !ok {
				return
			}
			b, _ := json.Marshal(map[string]any{"type": "resize", "rows": size.Rows, "cols": size.Cols})
			if conn.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
		}
	}
}

var errNoTTYSignals = errors.New("a terminal session carries no signals; type Ctrl-C (0x03) at it, or start a background process to signal it")
