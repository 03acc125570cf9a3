package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/wire"
)

// ability returns wk's workspace behind its policy Guard as T, when the
// backend's own workspace implements T (the Guard implements every
// interface, so the test is made on what it wraps).
func ability[T any](wk *workspace) (T, bool) {
	var zero T
	if _, ok := wk.ws.(T); !ok {
		return zero, false
	}
	t, ok := any(wk.guard).(T)
	return t, ok
}

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
	r.Group(func(r chi.Router) {
		r.Use(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON)
		r.Post("/glob", res.glob)
		r.Post("/search", res.search)
		r.Post("/exec", res.exec)
	})
	return r
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

// unsupported is the error for an operation the workspace does not serve.
func unsupported(wk *workspace, op string) error {
	return fmt.Errorf("workspace %s (%s) does not serve %s: %w", wk.id, wk.backend, op, ErrNotFound)
}

func (res opsResource) getFile(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "read")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if !s.decide(w, r, wk, policy.Call{Op: "read", Read: []string{p}}) {
		return
	}
	rd, ok := ability[opsapi.ReadOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "read"))
		return
	}
	rc, err := rd.Open(r.Context(), p)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	defer rc.Close()
	// Fill the first buffer before committing to 200: a failure that shows
	// only on read (a directory on some backends) is still a problem, and
	// a file that fits goes out in one write with its Content-Length.
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	n, err := io.ReadFull(rc, buf)
	whole := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if err != nil && !whole {
		writeProblem(w, r, s.logger, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if red := s.policyOf(wk.tenant).Redactor(); !red.Empty() {
		// Redaction changes the length, so the body streams without one.
		w.WriteHeader(http.StatusOK)
		sr := policy.NewStreamRedactor(red, w)
		if _, err := sr.Write(buf[:n]); err != nil || whole {
			_ = sr.Flush()
			return
		}
		if _, err := io.CopyBuffer(sr, rc, buf); err != nil {
			s.logger.Warn("file stream broken", "request_id", middleware.GetReqID(r.Context()),
				"workspace", wk.id, "err", err)
			panic(http.ErrAbortHandler)
		}
		_ = sr.Flush()
		return
	}
	if whole {
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
			"workspace", wk.id, "err", err)
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
	if !s.decide(w, r, wk, policy.Call{Op: "write", Write: []string{p}}) {
		return
	}
	wo, ok := ability[opsapi.WriteOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "write"))
		return
	}
	if mkdirs {
		if err := wo.Mkdir(r.Context(), path.Dir(opsapi.Resolve(wk.ws.Root(), p))); err != nil {
			writeProblem(w, r, s.logger, err)
			return
		}
	}
	body := &uploadBody{r: r.Body}
	err = wo.WriteFile(r.Context(), p, body)
	if body.overflow != nil {
		err = fmt.Errorf("upload of %s is larger than %d bytes: %w", p, s.cfg.MaxUploadBytes, body.overflow)
	}
	if err != nil {
		writeProblem(w, r, s.logger, err)
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

// statter is what every Stat-bearing operations interface shares.
type statter interface {
	Stat(ctx context.Context, path string) (opsapi.FileInfo, error)
}

func (res opsResource) stat(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "stat")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if !s.decide(w, r, wk, policy.Call{Op: "stat", Read: []string{p}}) {
		return
	}
	st, ok := ability[statter](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "stat"))
		return
	}
	rd, canRead := ability[opsapi.ReadOperations](wk)
	if a := r.URL.Query().Get("access"); a != "" {
		var mode opsapi.AccessMode
		switch a {
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
		if !canRead {
			writeProblem(w, r, s.logger, unsupported(wk, "access"))
			return
		}
		if err := rd.Access(r.Context(), p, mode); err != nil {
			writeProblem(w, r, s.logger, err)
			return
		}
	}
	fi, err := st.Stat(r.Context(), p)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	out := wire.StatResponse{FileInfo: fi}
	if canRead && fi.Type == opsapi.TypeFile && fi.Size > 0 {
		out.MIME = sniffImage(r.Context(), rd, p)
	}
	writeJSON(w, r, http.StatusOK, out)
}

// sniffImage returns the image media type of path's first 512 bytes, or ""
// when it is not an image or cannot be read.
func sniffImage(ctx context.Context, rd opsapi.ReadOperations, p string) string {
	rc, err := rd.Open(ctx, p)
	if err != nil {
		return ""
	}
	defer rc.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(rc, head)
	mt := http.DetectContentType(head[:n])
	if strings.HasPrefix(mt, "image/") {
		return mt
	}
	return ""
}

func (res opsResource) realpath(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "realpath")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if !s.decide(w, r, wk, policy.Call{Op: "realpath", Read: []string{p}}) {
		return
	}
	rs, ok := ability[opsapi.Resolver](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "realpath"))
		return
	}
	rp, err := rs.RealPath(r.Context(), p)
	if err != nil {
		writeProblem(w, r, s.logger, err)
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
	if !s.decide(w, r, wk, policy.Call{Op: "readdir", Read: []string{p}}) {
		return
	}
	ls, ok := ability[opsapi.LsOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "readdir"))
		return
	}
	entries, err := ls.ReadDir(r.Context(), p)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if entries == nil {
		entries = []opsapi.FileInfo{}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	writeJSON(w, r, http.StatusOK, wire.DirList{Entries: entries})
}

func (res opsResource) mkdir(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "mkdir")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if !s.decide(w, r, wk, policy.Call{Op: "mkdir", Write: []string{p}}) {
		return
	}
	wo, ok := ability[opsapi.WriteOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "mkdir"))
		return
	}
	if err := wo.Mkdir(r.Context(), p); err != nil {
		writeProblem(w, r, s.logger, err)
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
	data, err := s.readBody(w, r)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var req opsapi.GlobRequest
	if err := decodeStrict(data, &req); err != nil {
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
	if !s.decide(w, r, wk, policy.Call{Op: "glob", Read: []string{req.Dir}}) {
		return
	}
	fo, ok := ability[opsapi.FindOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "glob"))
		return
	}
	out, err := fo.Glob(r.Context(), req)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if out.Paths == nil {
		out.Paths = []string{}
	}
	writeJSON(w, r, http.StatusOK, out)
}

func (res opsResource) search(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	data, err := s.readBody(w, r)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var req opsapi.SearchRequest
	if err := decodeStrict(data, &req); err != nil {
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
	if !s.decide(w, r, wk, policy.Call{Op: "search", Read: []string{req.Path}}) {
		return
	}
	gr, ok := ability[opsapi.GrepOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "search"))
		return
	}
	out, err := gr.Search(r.Context(), req)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	if out.Lines == nil {
		out.Lines = []opsapi.SearchLine{}
	}
	red := s.policyOf(wk.tenant).Redactor()
	for i := range out.Lines {
		out.Lines[i].Text = red.String(out.Lines[i].Text)
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
	s, wk := res.s, workspaceFrom(r.Context())
	data, err := s.readBody(w, r)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	var body wire.ExecRequest
	if err := decodeStrict(data, &body); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	req, err := execRequest(body)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	red := s.policyOf(wk.tenant).Redactor()
	envNames := policy.EnvNames(req.Env)
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) {
		ev.Args = &audit.Args{Path: req.Cwd, Command: audit.Truncate(red.String(req.Command), audit.MaxCommand), Env: envNames}
	})
	if !s.decide(w, r, wk, policy.Call{Op: "exec", Command: req.Command, HasCommand: true, Timeout: req.Timeout, Env: envNames}) {
		return
	}
	bo, ok := ability[opsapi.BashOperations](wk)
	if !ok {
		writeProblem(w, r, s.logger, unsupported(wk, "exec"))
		return
	}
	// The request context ends when the client disconnects, which cancels
	// the command and so kills its whole tree.
	ctx, end, err := s.startCommand(r.Context(), wk.id)
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	defer end()
	out := &execStream{w: w}
	// Redacted before it leaves: whole lines at a time, so a secret split
	// between two reads of the pipe is joined first.
	sr := policy.NewStreamRedactor(red, out)
	req.Output = sr
	result, err := bo.Exec(ctx, req)
	_ = sr.Flush()
	if err != nil {
		if !out.started {
			writeProblem(w, r, s.logger, err)
			return
		}
		_, code := ToHTTP(err)
		out.last(wire.ExecLine{Type: wire.LineError, Code: code, Detail: err.Error()})
		return
	}
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) {
		ev.Result = &audit.Result{ExitCode: &result.ExitCode}
	})
	out.last(wire.ExecExit{Type: wire.LineExit, ExecResult: result})
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
	h := e.w.Header()
	h.Set("Content-Type", ndjson)
	h.Set("X-Content-Type-Options", "nosniff")
	e.w.WriteHeader(http.StatusOK)
	e.lw = newLineWriter(e.w)
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
	for rest := p; len(rest) > 0; {
		n := min(len(rest), execChunk)
		e.line(wire.ExecLine{Type: wire.LineOutput, Data: rest[:n]})
		rest = rest[n:]
	}
	return len(p), nil
}
