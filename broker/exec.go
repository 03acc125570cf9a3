package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// MaxExecTimeout is the largest exec timeout accepted, in seconds: the
// largest delay a JavaScript timer (pi's host) can express, 2^31-1 ms.
const MaxExecTimeout = 2147483.647

// execChunk bounds the raw bytes of one output line, so that a line stays
// under 64 KiB once base64-encoded (a bufio.Scanner's default limit).
const execChunk = 32 << 10

// execRoute takes the command as a JSON body, or, with a body of
// application/octet-stream, from the query (command, cwd, env repeated,
// timeout) with the body as the command's stdin.
func (res opsResource) execRoute() http.HandlerFunc {
	s := res.s
	asJSON := s.limitBody(s.cfg.MaxJSONBody)(s.requireJSON(http.HandlerFunc(res.exec)))
	withStdin := s.limitBody(s.cfg.MaxUploadBytes)(http.HandlerFunc(res.execStdin))
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/octet-stream" {
			withStdin.ServeHTTP(w, r)
			return
		}
		asJSON.ServeHTTP(w, r)
	}
}

// execRequest validates the body of POST /exec field by field and converts
// it.
func execRequest(req wire.ExecRequest) (opsapi.ExecRequest, error) {
	fields := map[string]string{"command": req.Command, "cwd": req.Cwd}
	for i, e := range req.Env {
		fields[fmt.Sprintf("env[%d]", i)] = e
	}
	if err := noNUL("exec", fields); err != nil {
		return opsapi.ExecRequest{}, err
	}
	if strings.TrimSpace(req.Command) == "" {
		return opsapi.ExecRequest{}, invalid("exec", "", "field \"command\" is empty")
	}
	for i, e := range req.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return opsapi.ExecRequest{}, invalid("exec", "", "field \"env[%d]\" must be KEY=VALUE, got %q", i, e)
		}
	}
	t := req.Timeout
	if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 || t > MaxExecTimeout {
		return opsapi.ExecRequest{}, invalid("exec", "",
			"field \"timeout\" must be a number of seconds from 0 to %s, got %s",
			strconv.FormatFloat(MaxExecTimeout, 'f', -1, 64), strconv.FormatFloat(t, 'f', -1, 64))
	}
	return opsapi.ExecRequest{
		Command: req.Command,
		Cwd:     req.Cwd,
		Env:     req.Env,
		Timeout: time.Duration(math.Round(t * float64(time.Second))),
	}, nil
}

func (res opsResource) exec(w http.ResponseWriter, r *http.Request) {
	s := res.s
	var body wire.ExecRequest
	if err := s.decodeJSON(w, r, &body); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	req, err := execRequest(body)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	res.run(serviceCtx(r), w, r, req)
}

// execStdin runs the command the query describes with the request body as
// its stdin. Output streams back while the body still comes in.
func (res opsResource) execStdin(w http.ResponseWriter, r *http.Request) {
	s := res.s
	req, err := execFromQuery(r.URL.Query())
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	// HTTP/1.1 handlers otherwise stop reading the body once the
	// response begins.
	_ = http.NewResponseController(w).EnableFullDuplex()
	// A body that breaks off (not a clean end) is a client gone: kill the
	// command, as a dropped exec stream does. Until the body has ended
	// the server does not watch the connection for that itself.
	ctx, cancel := context.WithCancelCause(serviceCtx(r))
	defer cancel(nil)
	stdin := &stdinBody{r: r.Body, broke: cancel, done: make(chan struct{})}
	defer close(stdin.done)
	req.Stdin = stdin
	res.run(ctx, w, r, req)
}

// stdinBody is an exec's request body as its stdin.
type stdinBody struct {
	r     io.Reader
	broke context.CancelCauseFunc
	done  chan struct{} // closed when the command has returned
}

// Read passes the body on. A body that breaks off kills the command, and
// the command never sees an end of its stdin: an end would let it go on
// (`cat; rm -rf x` runs the rm at EOF) while the kill is on its way.
func (b *stdinBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.broke(fmt.Errorf("%w: the request body (the command's stdin) broke off: %w", opsapi.ErrCanceled, err))
		<-b.done
	}
	return n, err
}

// execFromQuery reads an exec request from query values and validates it
// as POST /exec's body.
func execFromQuery(q url.Values) (opsapi.ExecRequest, error) {
	body, err := execQueryValues(q)
	if err != nil {
		return opsapi.ExecRequest{}, err
	}
	return execRequest(body)
}

// execQueryValues reads an exec request from query values: each field at
// most once, env any number of times.
func execQueryValues(q url.Values) (wire.ExecRequest, error) {
	for name, vals := range q {
		switch {
		case name != "command" && name != "cwd" && name != "env" && name != "timeout":
			return wire.ExecRequest{}, invalid("exec", "", "unknown query parameter %q (command, cwd, env, timeout)", name)
		case name != "env" && len(vals) > 1:
			return wire.ExecRequest{}, invalid("exec", "", "query parameter %q given %d times", name, len(vals))
		}
	}
	req := wire.ExecRequest{Command: q.Get("command"), Cwd: q.Get("cwd"), Env: q["env"]}
	if v := q.Get("timeout"); v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return wire.ExecRequest{}, invalid("exec", "", "query parameter \"timeout\" must be a number of seconds, got %q", v)
		}
		req.Timeout = t
	}
	return req, nil
}

// run runs req and streams its output and result.
func (res opsResource) run(ctx context.Context, w http.ResponseWriter, r *http.Request, req opsapi.ExecRequest) {
	s, wk := res.s, workspaceFrom(r.Context())
	// The request context ends when the client disconnects, which cancels
	// the command and so kills its whole tree.
	out := &execStream{w: w}
	req.Output = out
	result, err := s.svc.Exec(ctx, wk, req)
	if err != nil {
		if !out.started {
			s.fail(w, r, err)
			return
		}
		_, code := ToHTTP(fromService(err))
		out.last(wire.ExecLine{Type: "error", Code: code, Detail: err.Error()})
		return
	}
	out.last(wire.ExecExit{Type: "exit", ExecResult: result})
}

// execStream turns the command's output into NDJSON lines. Headers go out
// with the first line, so that a command that cannot start still gets a
// problem response.
type execStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	lw      *lineWriter
	started bool
}

func (e *execStream) start() {
	if e.started {
		return
	}
	e.started = true
	e.lw = newLineWriter(e.w) // writes the status and headers with the first line
}

func (e *execStream) line(v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start()
	e.lw.write(v)
}

// last writes the final line (see lineWriter.last).
func (e *execStream) last(v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start()
	e.lw.last(v)
}

// Write never fails: once the client is gone the request context kills the
// command, and refusing its output meanwhile could only stall it.
func (e *execStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // no line, and the headers wait for one
	}
	buf := outputLines.Get().(*[]byte)
	defer outputLines.Put(buf)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start()
	for rest := p; len(rest) > 0; {
		n := min(len(rest), execChunk)
		*buf = appendOutputLine((*buf)[:0], rest[:n])
		e.lw.writeRaw(*buf)
		rest = rest[n:]
	}
	return len(p), nil
}

// outputLines are the buffers output lines are built in: every byte a
// command prints passes through one, and json.Marshal's own buffer and
// copy per 32 KiB made most of the broker's garbage while 200 streams
// started at once (hostile.healthz in `make bench`).
var outputLines = sync.Pool{New: func() any {
	b := make([]byte, 0, len(outputPrefix)+base64.StdEncoding.EncodedLen(execChunk)+len(outputSuffix))
	return &b
}}

const (
	outputPrefix = `{"type":"` + wire.LineOutput + `","data":"`
	outputSuffix = "\"}\n"
)

// appendOutputLine appends the NDJSON line json.Marshal makes of
// wire.ExecLine{Type: wire.LineOutput, Data: data}, newline included:
// base64 needs no escaping.
func appendOutputLine(dst, data []byte) []byte {
	dst = append(dst, outputPrefix...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, outputSuffix...)
}
