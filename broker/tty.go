package broker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// Bounds of a terminal's size, in cells; the default is 24x80.
const (
	maxTTYCells     = 1000
	defaultTTYRows  = 24
	defaultTTYCols  = 80
	maxTTYInMessage = 64 << 10
)

// execTTY runs a command on a pseudo-terminal over a WebSocket
// (GET /exec/tty): the command as exec's query has it, plus rows and
// cols. Binary messages from the client are typed at the terminal, text
// messages are control ({"type":"resize","rows":R,"cols":C}); binary
// messages to the client are what the terminal displays, and one text
// message ends the session: the exit line, or an error line, as exec's.
// A client that goes away kills the command's tree.
func (res opsResource) execTTY(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	q := r.URL.Query()
	size, err := ttySize(q.Get("rows"), q.Get("cols"))
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	q.Del("rows")
	q.Del("cols")
	req, err := execFromQuery(q)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	conn.SetReadLimit(maxTTYInMessage)
	// The request's context is not to be used once the connection is
	// hijacked; the session's ends with the client's.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(serviceCtx(r)))
	defer cancel(nil)
	in, resize := ttyInput(ctx, conn, cancel)
	req.TTY, req.Stdin, req.Resize = &size, in, resize
	req.Output = &wsOutput{ctx: ctx, conn: conn}
	result, err := s.svc.Exec(ctx, wk, req)
	in.CloseWithError(io.EOF)
	var last any = wire.ExecExit{Type: wire.LineExit, ExecResult: result}
	if err != nil {
		_, code := ToHTTP(fromService(err))
		last = wire.ExecLine{Type: wire.LineError, Code: code, Detail: err.Error()}
	}
	b, _ := json.Marshal(last)
	if conn.Write(ctx, websocket.MessageText, b) == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "")
		return
	}
	_ = conn.CloseNow()
}

// ttySize parses rows and cols (each optional).
func ttySize(rows, cols string) (opsapi.TTYSize, error) {
	size := opsapi.TTYSize{Rows: defaultTTYRows, Cols: defaultTTYCols}
	for _, p := range []struct {
		name, v string
		dst     *uint16
	}{{"rows", rows, &size.Rows}, {"cols", cols, &size.Cols}} {
		if p.v == "" {
			continue
		}
		n, err := strconv.Atoi(p.v)
		if err != nil || n < 1 || n > maxTTYCells {
			return size, invalid("exec", "", "query parameter %q must be a number of cells from 1 to %d, got %q", p.name, maxTTYCells, p.v)
		}
		*p.dst = uint16(n)
	}
	return size, nil
}

// ttyControl is a text message from the client.
type ttyControl struct {
	Type string `json:"type"` // "resize"
	Rows int    `json:"rows"`
	Cols int    `json:"cols"`
}

// ttyInput reads the client's messages until the connection ends, which
// cancels the session: binary ones go to the returned pipe (the
// terminal's input, in order, at the pace the command takes them),
// resizes to the channel (the newest wins when the command lags).
func ttyInput(ctx context.Context, conn *websocket.Conn, cancel context.CancelCauseFunc) (*io.PipeReader, <-chan opsapi.TTYSize) {
	pr, pw := io.Pipe()
	resize := make(chan opsapi.TTYSize, 1)
	go func() {
		defer cancel(errors.New("the terminal's client went away"))
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := pw.Write(data); err != nil {
					return
				}
				continue
			}
			var c ttyControl
			if json.Unmarshal(data, &c) != nil || c.Type != "resize" ||
				c.Rows < 1 || c.Cols < 1 || c.Rows > maxTTYCells || c.Cols > maxTTYCells {
				_ = conn.Close(websocket.StatusUnsupportedData, `control messages are {"type":"resize","rows":R,"cols":C}`)
				pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			}
			size := opsapi.TTYSize{Rows: uint16(c.Rows), Cols: uint16(c.Cols)}
			select {
			case <-resize: // drop a size not yet applied
			default:
			}
			resize <- size
		}
	}()
	return pr, resize
}

// wsOutput sends what the terminal displays as binary messages.
type wsOutput struct {
	ctx  context.Context
	conn *websocket.Conn
}

// Write never fails: once the client is gone the session's context
// kills the command, and refusing output meanwhile could only stall it.
func (o *wsOutput) Write(p []byte) (int, error) {
	_ = o.conn.Write(o.ctx, websocket.MessageBinary, p)
	return len(p), nil
}
