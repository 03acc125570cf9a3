package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/agent"
	"github.com/wsbroker/wsbroker/backends/shared/execconf"
	"github.com/wsbroker/wsbroker/backends/shared/execpump"
	"github.com/wsbroker/wsbroker/backends/shared/remoteexec"
	"github.com/wsbroker/wsbroker/opsapi"
)

// ExecConfig are a command's settings that come from the backend's
// configuration (RgPath is not used here).
type ExecConfig = execconf.Exec

// giveUpAfterKill is how long Exec waits for the exit once the kill is
// done before it abandons the command.
const giveUpAfterKill = 5 * time.Second

// killAnswer bounds the wait for the agent's report of a kill beyond the
// grace.
const killAnswer = 30 * time.Second

// cwdErrors are the agent's reasons a command could not start in its
// directory.
var cwdErrors = map[string]error{
	"nocwd":  opsapi.ErrNotExist,
	"notdir": opsapi.ErrNotDir,
	"noperm": opsapi.ErrPermission,
}

// Exec runs req.Command in the absolute directory cwd with env (the
// request's and the backend's KEY=VALUE pairs) as
// opsapi.BashOperations.Exec describes. A connection that fails before
// the command's end is ErrUnavailable; the agent kills what it left.
func (c *Client) Exec(ctx context.Context, req opsapi.ExecRequest, cwd string, env []string, cfg ExecConfig) (opsapi.ExecResult, error) {
	begin := time.Now()
	spec := agent.ExecSpec{Shell: cfg.Shell, Command: req.Command, Cwd: cwd, Env: env, GraceMS: cfg.KillGrace.Milliseconds()}
	x, err := c.start(ctx, spec, nil)
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	res, err := execpump.Run(ctx, x.out, x.events, execpump.Config{
		Output:    req.Output,
		Timeout:   req.Timeout,
		DrainIdle: cfg.DrainIdle,
		MaxDrain:  cfg.MaxDrain,
		Kill:      func() int { return x.kill(cfg.KillGrace) },
		GiveUp:    giveUpAfterKill,
		Close:     x.close,
		CloseWait: time.Second,
	})
	x.close()
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	res.Duration = time.Since(begin)
	if !res.StatusKnown {
		return res.ExecResult, fmt.Errorf("%w: connection lost while the command ran (the in-box agent's)", opsapi.ErrUnavailable)
	}
	return res.ExecResult, nil
}

// start opens an exec stream for spec; stderr, when spec.Stderr, receives
// the command's stderr (it must not block).
func (c *Client) start(ctx context.Context, spec agent.ExecSpec, stderr io.Writer) (*execCall, error) {
	st, err := c.open(ctx, agent.Request{Op: agent.OpExec, Exec: &spec})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: starting a command through the agent: %w", opsapi.ErrUnavailable, err)
	}
	x := newExecCall(st)
	x.stderr = stderr
	go x.readFrames()
	return x, nil
}

// Process is a program started through the agent with its stderr apart
// (e.g. ripgrep, whose stdout is a JSON stream).
type Process struct{ x *execCall }

// Start runs argv in cwd with env added; stderr receives its stderr and
// must not block. Closing the Process before the program exited kills it
// with everything it started.
func (c *Client) Start(ctx context.Context, argv []string, cwd string, env []string, stderr io.Writer) (*Process, error) {
	spec := agent.ExecSpec{Argv: argv, Cwd: cwd, Env: env, Stderr: true, GraceMS: 500}
	x, err := c.start(ctx, spec, stderr)
	if err != nil {
		return nil, err
	}
	return &Process{x: x}, nil
}

// Stdout is the program's standard output.
func (p *Process) Stdout() io.Reader { return p.x.out }

// Close ends the stream (and kills the program, if it still runs).
func (p *Process) Close() { p.x.close() }

// Wait returns the program's exit status; err when the connection ended
// without one or it could not start.
func (p *Process) Wait() (int, error) {
	for {
		select {
		case ev := <-p.x.events:
			if ev.Err != nil {
				return -1, ev.Err
			}
			if ev.Exited {
				if ev.Status == nil {
					return -1, fmt.Errorf("%w: connection lost while the command ran (the in-box agent's)", opsapi.ErrUnavailable)
				}
				return ev.Status.Code, nil
			}
		case <-p.x.done:
			return -1, errors.New("process closed before it ended")
		}
	}
}

// execCall is the client's side of one exec stream.
type execCall struct {
	st     net.Conn
	out    *io.PipeReader
	outW   *io.PipeWriter
	events chan execpump.Event
	killed chan int
	stderr io.Writer // FrameStderr's payloads, when asked for apart
	done   chan struct{}
	once   sync.Once
	wmu    sync.Mutex
}

func newExecCall(st net.Conn) *execCall {
	r, w := io.Pipe()
	return &execCall{st: st, out: r, outW: w, events: make(chan execpump.Event, 4),
		killed: make(chan int, 1), done: make(chan struct{})}
}

// close ends the stream; before the exit, the agent takes that as a kill.
func (x *execCall) close() {
	x.once.Do(func() {
		close(x.done)
		x.st.Close()
		x.out.CloseWithError(io.ErrClosedPipe)
	})
}

func (x *execCall) send(ev execpump.Event) {
	select {
	case x.events <- ev:
	case <-x.done:
	}
}

// readFrames turns the agent's frames into output and events.
func (x *execCall) readFrames() {
	fr := agent.NewFrameReader(x.st)
	exited := false
	for {
		typ, p, err := fr.Read()
		if err != nil {
			x.outW.CloseWithError(io.EOF)
			if !exited {
				// The stream ended without a status: the connection is
				// gone.
				x.send(execpump.Event{Exited: true})
			}
			return
		}
		switch typ {
		case agent.FrameOutput:
			// A failed write means the pump is done; keep reading
			// frames for the status.
			_, _ = x.outW.Write(p)
		case agent.FrameStderr:
			if x.stderr != nil {
				_, _ = x.stderr.Write(p)
			}
		case agent.FrameEOF:
			x.outW.CloseWithError(io.EOF)
		case agent.FrameExit:
			code, _ := strconv.Atoi(string(p))
			exited = true
			st := &execpump.Status{Code: code}
			if code > 128 {
				st.Signal = remoteexec.SignalName(code - 128)
			}
			x.send(execpump.Event{Exited: true, Status: st})
		case agent.FrameError:
			exited = true
			why := string(p)
			err, ok := cwdErrors[why]
			if !ok {
				err = errors.New(why)
			}
			x.send(execpump.Event{Err: err})
		case agent.FrameKilled:
			n, _ := strconv.Atoi(string(p))
			select {
			case x.killed <- n:
			default:
			}
		}
	}
}

// kill asks the agent to end the command's tree and waits for its count.
func (x *execCall) kill(grace time.Duration) int {
	x.wmu.Lock()
	err := agent.WriteFrame(x.st, agent.FrameKill, nil)
	x.wmu.Unlock()
	if err != nil {
		return 0
	}
	t := time.NewTimer(grace + killAnswer)
	defer t.Stop()
	select {
	case n := <-x.killed:
		return n
	case <-t.C:
	case <-x.done:
	}
	return 0
}
