package bgproc

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// The states of a process.
const (
	Running = "running"
	Exited  = "exited" // it ran and ended: Result says how
	Failed  = "failed" // it could not start, or its backend was lost: Error says why
)

// RunFunc runs a command to its end, as opsapi.BashOperations.Exec does.
type RunFunc func(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error)

// Spec is a process to start.
type Spec struct {
	// Request is the command: Command, Cwd, Env and Timeout are used;
	// Output, Stdin and Signals are the process's own.
	Request opsapi.ExecRequest
	// Command is the command as shown (redacted); Request.Command when empty.
	Command string
	// Tag is the caller's label for the process.
	Tag string
	// Stdin keeps the command's stdin open for WriteStdin; otherwise it
	// is /dev/null.
	Stdin bool
}

// Info describes a process.
type Info struct {
	ID        string
	Tag       string
	Command   string // as shown (Spec.Command)
	Cwd       string
	State     string // Running, Exited or Failed
	StartedAt time.Time
	EndedAt   time.Time // zero while running
	// Result is how an exited process ended.
	Result *opsapi.ExecResult
	// Error is why a failed process could not run.
	Error string
	// Stdin says whether stdin is open for writing.
	Stdin bool
	// Output is what its log holds.
	Output Span
	// Usage is what a running process's tree uses now, where its backend
	// can measure it; nil otherwise.
	Usage *opsapi.Usage
}

// Process is one background process.
type Process struct {
	id      string
	spec    Spec
	started time.Time
	log     *Ring
	stdin   *stdinQueue // nil without Spec.Stdin
	signals chan syscall.Signal
	cancel  context.CancelCauseFunc
	done    chan struct{} // closed when it has ended

	// measure is the backend's measure of the running tree (Started).
	measure atomic.Pointer[func() opsapi.Usage]

	mu     sync.Mutex
	ended  time.Time
	result *opsapi.ExecResult
	err    error
}

// ID is the process's handle.
func (p *Process) ID() string { return p.id }

// Log is the process's output.
func (p *Process) Log() *Ring { return p.log }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// run is the process's life: the command, then its record.
func (p *Process) run(ctx context.Context, run RunFunc) {
	req := p.spec.Request
	req.Output = p.log
	req.Signals = p.signals
	if p.stdin != nil {
		req.Stdin = p.stdin
	}
	req.Started = func(m func() opsapi.Usage) { p.measure.Store(&m) }
	res, err := run(ctx, req)
	p.measure.Store(nil) // it may not be called once the command has returned
	if p.stdin != nil {
		p.stdin.stop() // unblocks a Read the backend left
	}
	p.log.CloseWrite()
	p.mu.Lock()
	p.ended = time.Now()
	if err != nil {
		p.err = err
	} else {
		p.result = &res
	}
	p.mu.Unlock()
	close(p.done)
}

// Info describes the process now.
func (p *Process) Info() Info {
	sp := p.log.Span()
	i := Info{
		ID:        p.id,
		Tag:       p.spec.Tag,
		Command:   p.spec.Command,
		Cwd:       p.spec.Request.Cwd,
		State:     Running,
		StartedAt: p.started.UTC(),
		Stdin:     p.stdin != nil && !p.stdin.isClosed(),
		Output:    sp,
	}
	if m := p.measure.Load(); m != nil {
		u := (*m)()
		i.Usage = &u
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended.IsZero() {
		i.Usage = nil
		i.EndedAt = p.ended.UTC()
		i.Stdin = false
		if p.err != nil {
			i.State, i.Error = Failed, p.err.Error()
		} else {
			i.State, i.Result = Exited, p.result
		}
	}
	return i
}

// Err is why a failed process could not run, nil otherwise.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait returns the process's Info once it has ended, or when ctx ends
// (with the Info of a running process, and no error: a wait that timed
// out is an answer, not a failure).
func (p *Process) Wait(ctx context.Context) Info {
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	return p.Info()
}

// ErrNotRunning is a signal or stdin write to a process that has ended.
var ErrNotRunning = fmt.Errorf("%w: the process is not running", opsapi.ErrInvalid)

// Signal sends sig to the process's whole tree.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	select {
	case <-p.done:
		return ErrNotRunning
	default:
	}
	select {
	case p.signals <- sig:
		return nil
	case <-p.done:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WriteStdin sends what r yields to the process's stdin, waiting while
// the command has not read what came before. It returns the bytes taken;
// with close, stdin is closed after them.
func (p *Process) WriteStdin(ctx context.Context, r io.Reader, close bool) (int64, error) {
	if p.stdin == nil {
		return 0, fmt.Errorf("%w: the process was started without stdin", opsapi.ErrInvalid)
	}
	var total int64
	buf := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			m, err := p.stdin.write(ctx, buf[:n])
			total += int64(m)
			if err != nil {
				return total, p.stdinErr(err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return total, rerr
		}
	}
	if close {
		p.stdin.close()
	}
	return total, nil
}

// CloseStdin closes the process's stdin: the command reads EOF after what
// was written.
func (p *Process) CloseStdin() error {
	if p.stdin == nil {
		return fmt.Errorf("%w: the process was started without stdin", opsapi.ErrInvalid)
	}
	p.stdin.close()
	return nil
}

func (p *Process) stdinErr(err error) error {
	switch err {
	case errStdinClosed:
		return fmt.Errorf("%w: %w", opsapi.ErrInvalid, err)
	case errProcessEnded:
		return ErrNotRunning
	}
	return err
}

// kill cancels the command, which kills its whole tree, and waits for it
// to end or ctx.
func (p *Process) kill(ctx context.Context, why error) error {
	p.cancel(why)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for process %s to end: %w", p.id, ctx.Err())
	}
}
