package workspaces

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"sort"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
)

// The raw operations. Each is admitted by the tenant's policy and quota
// (a denial is ErrDenied named for the operation), runs through the
// workspace's Guard, and redacts what it returns; an operation the
// workspace's backend does not serve is ErrNotFound.

// statter is what every Stat-bearing operations interface shares.
type statter interface {
	Stat(ctx context.Context, path string) (opsapi.FileInfo, error)
}

// Open opens the file at p for reading. When the tenant's policy redacts,
// the reader returns the redacted stream and redacted is true: its length
// is then not the file's.
func (s *Service) Open(ctx context.Context, w *Workspace, p string) (rc io.ReadCloser, redacted bool, err error) {
	ctx, _, err = s.admit(ctx, w, policy.Call{Op: "read", Read: []string{p}})
	if err != nil {
		return nil, false, err
	}
	rd, ok := opsapi.As[opsapi.ReadOperations](w.guard)
	if !ok {
		return nil, false, unsupported(w, "read")
	}
	rc, err = rd.Open(ctx, p)
	if err != nil {
		return nil, false, err
	}
	red := s.redactorOf(w)
	if red.Empty() {
		return rc, false, nil
	}
	return newRedactingReader(red, rc), true, nil
}

// WriteFile replaces the file at p with r's bytes, first creating its
// parent directories when mkdirs.
func (s *Service) WriteFile(ctx context.Context, w *Workspace, p string, r io.Reader, mkdirs bool) error {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "write", Write: []string{p}})
	if err != nil {
		return err
	}
	wo, ok := opsapi.As[opsapi.WriteOperations](w.guard)
	if !ok {
		return unsupported(w, "write")
	}
	if mkdirs {
		if err := wo.Mkdir(ctx, path.Dir(opsapi.Resolve(w.ws.Root(), p))); err != nil {
			return err
		}
	}
	return wo.WriteFile(ctx, p, r)
}

// Stat describes p, after checking that it allows access when access is
// not zero. head is the first bytes (up to 512) of a non-empty file, for
// the caller to sniff its type; nil for anything else.
func (s *Service) Stat(ctx context.Context, w *Workspace, p string, access opsapi.AccessMode) (fi opsapi.FileInfo, head []byte, err error) {
	ctx, _, err = s.admit(ctx, w, policy.Call{Op: "stat", Read: []string{p}})
	if err != nil {
		return fi, nil, err
	}
	st, ok := opsapi.As[statter](w.guard)
	if !ok {
		return fi, nil, unsupported(w, "stat")
	}
	rd, canRead := opsapi.As[opsapi.ReadOperations](w.guard)
	if access != 0 {
		if !canRead {
			return fi, nil, unsupported(w, "access")
		}
		if err := rd.Access(ctx, p, access); err != nil {
			return fi, nil, err
		}
	}
	fi, err = st.Stat(ctx, p)
	if err != nil {
		return fi, nil, err
	}
	if canRead && fi.Type == opsapi.TypeFile && fi.Size > 0 {
		head = readHead(ctx, rd, p)
	}
	return fi, head, nil
}

// readHead returns path's first 512 bytes, or nil when it cannot be read.
func readHead(ctx context.Context, rd opsapi.ReadOperations, p string) []byte {
	rc, err := rd.Open(ctx, p)
	if err != nil {
		return nil
	}
	defer rc.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(rc, head)
	return head[:n]
}

// RealPath resolves every link in p.
func (s *Service) RealPath(ctx context.Context, w *Workspace, p string) (string, error) {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "realpath", Read: []string{p}})
	if err != nil {
		return "", err
	}
	rs, ok := opsapi.As[opsapi.Resolver](w.guard)
	if !ok {
		return "", unsupported(w, "realpath")
	}
	return rs.RealPath(ctx, p)
}

// ReadDir lists the directory p, sorted by name; entries the policy hides
// are left out, and hidden says how many.
func (s *Service) ReadDir(ctx context.Context, w *Workspace, p string) (entries []opsapi.FileInfo, hidden int, err error) {
	ctx, _, err = s.admit(ctx, w, policy.Call{Op: "readdir", Read: []string{p}})
	if err != nil {
		return nil, 0, err
	}
	if _, ok := opsapi.As[opsapi.LsOperations](w.guard); !ok {
		return nil, 0, unsupported(w, "readdir")
	}
	entries, hidden, err = w.guard.ReadDirHiding(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	if entries == nil {
		entries = []opsapi.FileInfo{}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, hidden, nil
}

// Mkdir creates p and its missing parents.
func (s *Service) Mkdir(ctx context.Context, w *Workspace, p string) error {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "mkdir", Write: []string{p}})
	if err != nil {
		return err
	}
	wo, ok := opsapi.As[opsapi.WriteOperations](w.guard)
	if !ok {
		return unsupported(w, "mkdir")
	}
	return wo.Mkdir(ctx, p)
}

// Glob finds paths under req.Dir; matches the policy hides are left out.
func (s *Service) Glob(ctx context.Context, w *Workspace, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "glob", Read: []string{req.Dir}})
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	fo, ok := opsapi.As[opsapi.FindOperations](w.guard)
	if !ok {
		return opsapi.GlobResult{}, unsupported(w, "glob")
	}
	out, err := fo.Glob(ctx, req)
	if err != nil {
		return out, err
	}
	if out.Paths == nil {
		out.Paths = []string{}
	}
	return out, nil
}

// Search runs a search under req.Path; lines of files the policy hides
// are left out, and the rest redacted.
func (s *Service) Search(ctx context.Context, w *Workspace, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "search", Read: []string{req.Path}})
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	gr, ok := opsapi.As[opsapi.GrepOperations](w.guard)
	if !ok {
		return opsapi.SearchResult{}, unsupported(w, "search")
	}
	out, err := gr.Search(ctx, req)
	if err != nil {
		return out, err
	}
	if out.Lines == nil {
		out.Lines = []opsapi.SearchLine{}
	}
	red := s.redactorOf(w)
	for i := range out.Lines {
		out.Lines[i].Text = red.String(out.Lines[i].Text)
	}
	return out, nil
}

// Exec runs req.Command, streaming its redacted output to req.Output. It
// is a running command: Delete and Shutdown cancel it. The Notes in ctx
// hear the cwd, the redacted command, the env names and the exit code.
func (s *Service) Exec(ctx context.Context, w *Workspace, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	red := s.redactorOf(w)
	req.Env = w.commandEnv(req.Env)
	envNames := policy.EnvNames(req.Env)
	notesFrom(ctx).Args(req.Cwd, audit.Truncate(red.String(req.Command), audit.MaxCommand), envNames)
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "exec", Command: req.Command, HasCommand: true, Timeout: req.Timeout, Env: envNames})
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	bo, ok := opsapi.As[opsapi.BashOperations](w.guard)
	if !ok {
		return opsapi.ExecResult{}, unsupported(w, "exec")
	}
	ctx, end, err := s.startCommand(ctx, w)
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	defer end()
	// Redacted before it leaves: whole lines at a time, so a secret split
	// between two reads of the pipe is joined first.
	sr := policy.NewStreamRedactor(red, req.Output)
	req.Output = sr
	result, err := bo.Exec(ctx, req)
	_ = sr.Flush()
	if err != nil {
		return result, err
	}
	notesFrom(ctx).ExitCode(result.ExitCode)
	return result, nil
}

// Processes lists what the workspace's commands left running.
func (s *Service) Processes(ctx context.Context, w *Workspace) ([]opsapi.Process, error) {
	pm, ok := opsapi.As[opsapi.ProcessManager](w.guard)
	if !ok {
		return nil, unsupported(w, "processes")
	}
	ps, err := pm.Processes(ctx)
	if err != nil {
		return nil, err
	}
	if ps == nil {
		ps = []opsapi.Process{}
	}
	return ps, nil
}

// KillProcesses kills the given processes of the workspace, or all of them
// when pids is empty, and returns how many it killed.
func (s *Service) KillProcesses(ctx context.Context, w *Workspace, pids []int) (int, error) {
	pm, ok := opsapi.As[opsapi.ProcessManager](w.guard)
	if !ok {
		return 0, unsupported(w, "processes")
	}
	n, err := pm.KillProcesses(ctx, pids)
	if err != nil {
		return 0, err
	}
	s.logger.Info("processes killed", "workspace", w.id, "pids", pids, "killed", n)
	return n, nil
}

// redactingReader reads a file through a StreamRedactor: whole lines at a
// time, so a secret split between two reads is still found.
type redactingReader struct {
	src   io.ReadCloser
	sr    *policy.StreamRedactor
	out   bytes.Buffer
	chunk []byte
	done  bool
}

func newRedactingReader(red *policy.Redactor, src io.ReadCloser) *redactingReader {
	r := &redactingReader{src: src, chunk: make([]byte, 32<<10)}
	r.sr = policy.NewStreamRedactor(red, &r.out)
	return r
}

func (r *redactingReader) Read(p []byte) (int, error) {
	for r.out.Len() == 0 && !r.done {
		n, err := r.src.Read(r.chunk)
		if n > 0 {
			_, _ = r.sr.Write(r.chunk[:n]) // writes to a buffer cannot fail
		}
		switch {
		case errors.Is(err, io.EOF):
			_ = r.sr.Flush()
			r.done = true
		case err != nil:
			return 0, err
		}
	}
	if r.out.Len() == 0 {
		return 0, io.EOF
	}
	return r.out.Read(p)
}

func (r *redactingReader) Close() error { return r.src.Close() }
