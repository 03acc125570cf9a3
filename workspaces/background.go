package workspaces

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// BackgroundRequest is a command to start in the background.
type BackgroundRequest struct {
	// Request is the command: Command, Cwd, Env and Timeout.
	Request opsapi.ExecRequest
	Tag     string
	// Stdin keeps the command's stdin open for WriteStdin.
	Stdin bool
}

// StartProcess starts a command in the background and returns at once.
// It is decided as an exec is (the same policy, the same limits), its
// output is redacted into a bounded log, and it runs until it ends, is
// removed, or the workspace is deleted or the broker shuts down.
func (s *Service) StartProcess(ctx context.Context, w *Workspace, req BackgroundRequest) (bgproc.Info, error) {
	red := s.redactorOf(w)
	command := audit.Truncate(red.String(req.Request.Command), audit.MaxCommand)
	req.Request.Env = w.commandEnv(req.Request.Env)
	envNames := policy.EnvNames(req.Request.Env)
	notesFrom(ctx).Args(req.Request.Cwd, command, envNames)
	ctx, _, err := s.admit(ctx, w, policy.Call{Op: "exec", Command: req.Request.Command, HasCommand: true,
		Timeout: req.Request.Timeout, Env: envNames})
	if err != nil {
		return bgproc.Info{}, err
	}
	bo, ok := opsapi.As[opsapi.BashOperations](w.guard)
	if !ok {
		return bgproc.Info{}, unsupported(w, "processes")
	}
	// A missing or wrong directory is the caller's answer now, not a
	// failed process found later.
	if req.Request.Cwd != "" {
		fi, err := w.guard.Stat(ctx, req.Request.Cwd)
		if err != nil {
			return bgproc.Info{}, err
		}
		if !fi.IsDir() {
			return bgproc.Info{}, opsapi.E("processes", req.Request.Cwd, opsapi.ErrNotDir, nil)
		}
	}
	// The process outlives this request: its context keeps the admitted
	// call (so the guard does not decide it again) but not the request's
	// end, and its notes go nowhere (the request's record is written).
	life := context.WithValue(context.WithoutCancel(ctx), notesKey{}, Notes(nopNotes{}))
	life, end, err := s.startCommand(life, w)
	if err != nil {
		return bgproc.Info{}, err
	}
	run := func(ctx context.Context, er opsapi.ExecRequest) (opsapi.ExecResult, error) {
		defer end()
		sr := policy.NewStreamRedactor(red, er.Output)
		er.Output = sr
		res, err := bo.Exec(ctx, er)
		_ = sr.Flush()
		return res, err
	}
	p, err := w.procs.Start(life, bgproc.Spec{Request: req.Request, Command: command, Tag: req.Tag, Stdin: req.Stdin}, run)
	if err != nil {
		end()
		return bgproc.Info{}, err
	}
	s.logger.Info("background process started", "workspace", w.id, "process", p.ID(), "tag", req.Tag,
		"request_id", requestFrom(ctx).ID)
	return p.Info(), nil
}

// Process finds a background process of w.
func (s *Service) Process(w *Workspace, id string) (*bgproc.Process, error) {
	return w.procs.Get(id)
}

// BackgroundProcesses describes w's background processes, oldest first.
func (s *Service) BackgroundProcesses(w *Workspace) []bgproc.Info {
	return w.procs.List()
}

// RemoveProcess kills a background process's tree if it still runs,
// forgets it and deletes its log.
func (s *Service) RemoveProcess(ctx context.Context, w *Workspace, id string) (bgproc.Info, error) {
	info, err := w.procs.Remove(ctx, id)
	if err != nil {
		return info, err
	}
	s.logger.Info("background process removed", "workspace", w.id, "process", id, "state", info.State)
	return info, nil
}

// Signals a caller may send to a background process's tree, by name.
var Signals = map[string]syscall.Signal{
	"SIGHUP":  syscall.SIGHUP,
	"SIGINT":  syscall.SIGINT,
	"SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL,
	"SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2,
	"SIGTERM": syscall.SIGTERM,
}

// SignalProcess sends the named signal to a background process's tree.
func (s *Service) SignalProcess(ctx context.Context, w *Workspace, id, name string) error {
	sig, ok := Signals[name]
	if !ok {
		return opsapi.E("signal", "", opsapi.ErrInvalid, fmt.Errorf("signal %q is not one of SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM", name))
	}
	p, err := w.procs.Get(id)
	if err != nil {
		return err
	}
	return p.Signal(ctx, sig)
}

// WriteStdin sends r to a background process's stdin, closing it after
// when close is set, and returns the bytes taken.
func (s *Service) WriteStdin(ctx context.Context, w *Workspace, id string, r io.Reader, close bool) (int64, error) {
	p, err := w.procs.Get(id)
	if err != nil {
		return 0, err
	}
	n, err := p.WriteStdin(ctx, r, close)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = opsapi.E("stdin", "", nil, err)
	}
	return n, err
}
