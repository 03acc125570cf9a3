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

	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
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
// opsapi.BashOperations.Exec describes, req.Stdin, req.Signals, req.TTY
// and req.Resize included. A connection that fails before the command's
// end is ErrUnavailable, as is an agent too old for Stdin, Signals or TTY;
// the agent kills what it left.
func (c *Client) Exec(ctx context.Context, req opsapi.ExecRequest, cwd string, env []string, cfg ExecConfig) (opsapi.ExecResult, error) {
	begin := time.Now()
	if err := checkPeer(c.Version, req); err != nil {
		return opsapi.ExecResult{}, err
	}
	spec := agent.ExecSpec{Shell: cfg.Shell, Command: req.Command, Cwd: cwd, Env: env,
		GraceMS: cfg.KillGrace.Milliseconds(), Stdin: req.Stdin != nil}
	if req.TTY != nil {
		spec.TTY = &agent.TTYSize{Rows: req.TTY.Rows, Cols: req.TTY.Cols}
	}
	x, err := c.start(ctx, spec, nil)
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	if req.Stdin != nil {
		// Not waited for: it may be in a Read of req.Stdin that only the
		// caller can end.
		go x.pumpStdin(req.Stdin)
	}
	var forwarding sync.WaitGroup
	if req.Signals != nil {
		forwarding.Add(1)
		go func() { defer forwarding.Done(); x.forwardSignals(req.Signals) }()
	}
	if req.TTY != nil && req.Resize != nil {
		forwarding.Add(1)
		go func() { defer forwarding.Done(); x.forwardResizes(req.Resize) }()
	}
	// Exec receives no signal or size once it has returned.
	defer forwarding.Wait()
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

// checkPeer refuses what an agent of the given protocol version cannot
// do: a version-1 agent would ignore stdin and signals, leaving a command
// waiting on input that never comes or a signal that never arrives, and
// an agent before version 3 would run a command for a terminal on pipes.
func checkPeer(version int, req opsapi.ExecRequest) error {
	if version < agent.StdioVersion && (req.Stdin != nil || req.Signals != nil) {
		return fmt.Errorf("%w: the in-box agent is too old for a command's stdin or signals (it speaks protocol version %d; they need %d)",
			opsapi.ErrUnavailable, version, agent.StdioVersion)
	}
	if version < agent.TTYVersion && req.TTY != nil {
		return fmt.Errorf("%w: the in-box agent is too old for terminals (it speaks protocol version %d; they need %d)",
			opsapi.ErrUnavailable, version, agent.TTYVersion)
	}
	return nil
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
	// ended is closed when readFrames has returned: no frame, FrameKilled
	// included, comes after it.
	ended  chan struct{}
	once   sync.Once
	wmu    sync.Mutex
	credit *credit // stdin the agent will take now (FrameStdinAck)
	// stdinClosed is closed when the agent says the command's stdin has
	// no reader left (FrameStdinClosed).
	stdinClosed chan struct{}
	closedOnce  sync.Once
}

func newExecCall(st net.Conn) *execCall {
	r, w := io.Pipe()
	return &execCall{st: st, out: r, outW: w, events: make(chan execpump.Event, 4),
		killed: make(chan int, 1), done: make(chan struct{}), ended: make(chan struct{}),
		credit: newCredit(agent.StdinWindow), stdinClosed: make(chan struct{})}
}

// frame writes one frame to the agent.
func (x *execCall) frame(typ byte, payload []byte) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	return agent.WriteFrame(x.st, typ, payload)
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
	defer close(x.ended)
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
		case agent.FrameStdinAck:
			if n, err := strconv.Atoi(string(p)); err == nil {
				x.credit.give(n)
			}
		case agent.FrameStdinClosed:
			x.closedOnce.Do(func() { close(x.stdinClosed) })
		}
	}
}

// kill asks the agent to end the command's tree and waits for its count.
// It stops waiting when the stream ends: no answer can come then, and the
// pump waits for the kill before it returns. A broker's DELETE cancels the
// command and at once closes the agent's connection (Destroy), so without
// this an Exec over HTTP hung for killAnswer after its workspace was gone.
func (x *execCall) kill(grace time.Duration) int {
	if err := x.frame(agent.FrameKill, nil); err != nil {
		return 0
	}
	t := time.NewTimer(grace + killAnswer)
	defer t.Stop()
	select {
	case n := <-x.killed:
		return n
	case <-t.C:
	case <-x.done:
	case <-x.ended:
		// A count read just before the end is in killed already.
		select {
		case n := <-x.killed:
			return n
		default:
		}
	}
	return 0
}
