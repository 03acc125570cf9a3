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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// MaxExecTimeout is the largest exec timeout accepted, in seconds: the
// largest delay a JavaScript timer (pi's host) can express, 2^31-1 ms.
const MaxExecTimeout = 2147483.647

// execChunk bounds the raw bytes of one output line, so that a line stays
// under 64 KiB once base64-encoded (a bufio.Scanner's default limit).
const execChunk = 32 << 10

// opsResource serves the per-operation routes of one workspace.
type opsResource struct{ s *Server }

// Routes returns the operation routes: files, stat, realpath, dirs, glob,
// search and exec.
func (res opsResource) Routes() chi.Router {
	s := res.s
	r := chi.NewRouter()
	r.Get("/files", res.getFile)
	r.With(s.limitBody(s.cfg.MaxUploadBytes)).Put("/files", res.putFile)
	r.Get("/stat", res.stat)
	r.Get("/realpath", res.realpath)
	r.Get("/dirs", res.readDir)
	r.Post("/dirs", res.mkdir)
	r.With(s.limitBody(s.archiveBodyLimit())).Put("/archive", res.putArchive)
	r.Get("/archive", res.getArchive)
	r.Group(func(r chi.Router) {
		r.Use(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON)
		r.Post("/glob", res.glob)
		r.Post("/search", res.search)
	})
	r.Post("/exec", res.execRoute())
	r.Get("/exec/tty", res.execTTY)
	return r
}

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

// pathParam returns the one "path" query parameter. A missing parameter
// or a NUL byte is invalid; an empty value is passed on as it is.
func pathParam(r *http.Request, op string) (string, error) {
	vals, ok := r.URL.Query()["path"]
	switch {
	case !ok:
		return "", invalid(op, "", "missing query parameter \"path\"")
	case len(vals) > 1:
		return "", invalid(op, "", "query parameter \"path\" given %d times", len(vals))
	case strings.IndexByte(vals[0], 0) >= 0:
		return "", invalid(op, "", "query parameter \"path\" contains a NUL byte")
	}
	return vals[0], nil
}

func (res opsResource) getFile(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "read")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	rc, redacted, err := s.svc.Open(serviceCtx(r), wk, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	// Fill the first buffer before committing to 200: a failure that shows
	// only on read (a directory on some backends) is still a problem, and
	// a file that fits goes out in one write with its Content-Length
	// (unless redaction changed its length).
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	n, err := io.ReadFull(rc, buf)
	whole := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if err != nil && !whole {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if whole && !redacted {
		w.Header().Set("Content-Length", strconv.Itoa(n))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf[:n]); err != nil || whole {
		return // done, or the client left
	}
	if _, err := io.CopyBuffer(w, rc, buf); err != nil {
		// The status is sent; breaking the stream is the only way to tell
		// the client that what it got is incomplete.
		s.logger.Warn("file stream broken", "request_id", middleware.GetReqID(r.Context()),
			"workspace", wk.ID(), "err", err)
		panic(http.ErrAbortHandler)
	}
}

// copyBuffers recycles the file-read buffers: many small reads at once
// should not each allocate 32 KiB for the collector.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// uploadBody remembers that the upload overflowed, whatever the backend
// makes of the read error.
type uploadBody struct {
	r        io.Reader
	overflow error
}

func (u *uploadBody) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	var maxBytes *http.MaxBytesError
	if err != nil && errors.As(err, &maxBytes) {
		u.overflow = err
	}
	return n, err
}

func (res opsResource) putFile(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "write")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	mkdirs, err := boolParam(r, "mkdirs", "write")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	body := &uploadBody{r: r.Body}
	err = s.svc.WriteFile(serviceCtx(r), wk, p, body, mkdirs)
	if body.overflow != nil {
		err = fmt.Errorf("upload of %s is larger than %d bytes: %w", p, s.cfg.MaxUploadBytes, body.overflow)
	}
	if pb := pacerFrom(r.Context()); pb != nil && pb.slow() != nil {
		err = fmt.Errorf("%w: upload of %s: %w", ErrBadRequest, p, pb.slow())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// boolParam parses an optional boolean query parameter: 1/true or 0/false.
func boolParam(r *http.Request, name, op string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, invalid(op, "", "query parameter %q must be 1, true, 0 or false, got %q", name, v)
	}
}

func (res opsResource) stat(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "stat")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var mode opsapi.AccessMode
	switch a := r.URL.Query().Get("access"); a {
	case "":
	case "r":
		mode = opsapi.AccessRead
	case "w":
		mode = opsapi.AccessWrite
	case "rw":
		mode = opsapi.AccessRead | opsapi.AccessWrite
	default:
		writeProblem(w, r, s.logger, invalid("stat", "", "query parameter \"access\" must be r, w or rw, got %q", a))
		return
	}
	fi, head, err := s.svc.Stat(serviceCtx(r), wk, p, mode)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := wire.StatResponse{FileInfo: fi}
	if mt := http.DetectContentType(head); len(head) > 0 && strings.HasPrefix(mt, "image/") {
		out.MIME = mt
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (res opsResource) realpath(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "realpath")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	rp, err := s.svc.RealPath(serviceCtx(r), wk, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.RealPathResponse{Path: rp})
}

func (res opsResource) readDir(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "readdir")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	entries, hidden, err := s.svc.ReadDir(serviceCtx(r), wk, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, wire.DirList{Entries: entries, Hidden: hidden})
}

func (res opsResource) mkdir(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "mkdir")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if err := s.svc.Mkdir(serviceCtx(r), wk, p); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// noNUL refuses a NUL byte in a named field: no path or argument can
// carry one, and a backend might cut the string there.
func noNUL(op string, fields map[string]string) error {
	for _, name := range sortedKeys(fields) {
		if strings.IndexByte(fields[name], 0) >= 0 {
			return invalid(op, "", "field %q contains a NUL byte", name)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (res opsResource) glob(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	var req opsapi.GlobRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	fields := map[string]string{"pattern": req.Pattern, "cwd": req.Dir}
	for i, ig := range req.Ignore {
		fields[fmt.Sprintf("ignore[%d]", i)] = ig
	}
	if err := noNUL("glob", fields); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Args = &audit.Args{Path: req.Dir} })
	out, err := s.svc.Glob(serviceCtx(r), wk, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (res opsResource) search(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	var req opsapi.SearchRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if err := noNUL("search", map[string]string{"pattern": req.Pattern, "path": req.Path, "glob": req.Glob}); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if req.Context < 0 {
		writeProblem(w, r, s.logger, invalid("search", "", "field \"context\" must be >= 0, got %d", req.Context))
		return
	}
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) { ev.Args = &audit.Args{Path: req.Path} })
	out, err := s.svc.Search(serviceCtx(r), wk, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, out)
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
