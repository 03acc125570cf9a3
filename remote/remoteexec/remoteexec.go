package remoteexec

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Process is one command started on the remote side, with an empty stdin.
type Process interface {
	// Stdout and Stderr are the command's output streams; they end (EOF
	// or an error) when the remote side closes them or the process is
	// closed.
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait waits until the command has ended and its streams are closed,
	// and returns its exit status; err means the transport failed and no
	// status will come (e.g. the connection was lost).
	Wait() (Status, error)
	// Close abandons the command: its channel is closed, so that reads and
	// Wait return. It does not kill anything on the remote side.
	Close() error
}

// Exiter is a Process whose transport reports the exit status as soon as
// the command exits, even while a background child still holds its
// output (an SSH session's exit-status request). A Runner with
// Config.TransportExit lets the wrapper become the command on such a
// transport, one program less per command.
type Exiter interface {
	Process
	// Exited yields the status once the command has exited; it is closed
	// without one when the transport ends first.
	Exited() <-chan Status
}

// Status is how a remote command ended as the transport reports it.
type Status struct {
	Code   int    // exit status; 128+N when killed by signal N
	Signal string // "SIGTERM", when the transport names one
}

// StartFunc starts argv on the remote side (argv[0] is the program, found
// on the remote PATH). A failure to start is returned as an error; it
// should wrap opsapi.ErrUnavailable when the transport is down.
type StartFunc func(ctx context.Context, argv []string) (Process, error)

// RunFunc runs a short command to completion and returns its stdout.
type RunFunc func(ctx context.Context, argv []string) ([]byte, error)

// Config tunes a Runner. Zero fields take the defaults.
type Config struct {
	// Shell runs each command as `Shell -c COMMAND`. Default /bin/bash.
	Shell string
	// Env are KEY=VALUE pairs every command gets before the request's
	// own (e.g. LANG, TERM); the remote login environment is kept
	// underneath.
	Env []string
	// KillGrace is the time between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// DrainIdle is how long output must stay quiet after the command
	// exits before Exec returns. Default 100ms.
	DrainIdle time.Duration
	// MaxDrain caps the draining after the command exits. Default 5s.
	MaxDrain time.Duration
	// Op names the operation in errors, e.g. "ssh.Exec". Default
	// "remoteexec.Exec".
	Op string
	// TransportExit says the StartFunc's processes are Exiters. The
	// wrapper then runs the command in its own place when the transport
	// already made it a process group leader (sshd starts every session
	// in a new session), instead of starting it under setsid and waiting
	// for it.
	TransportExit bool
	// Headroom, when set, lends the sandbox room for a few more processes
	// (a container's pids limit) and returns how to take it back. The kill
	// sweep asks for it once when it cannot start: at a full process limit
	// a docker exec's runtime cannot fork, and a fork bomb's processes,
	// asleep in bash's fork retry, may free no slot for many seconds.
	Headroom func(ctx context.Context) (restore func(), err error)
}

// Defaults.
const (
	DefaultShell     = "/bin/bash"
	DefaultKillGrace = 2 * time.Second
	DefaultDrainIdle = 100 * time.Millisecond
	DefaultMaxDrain  = 5 * time.Second
)

// CallKey is the environment variable that marks every process of one
// call.
const CallKey = "WSBROKER_CALL"

// giveUpAfterKill is how long Exec waits for the command to end once the
// kill has run, before it abandons the process.
const giveUpAfterKill = 5 * time.Second

// Runner runs commands through one transport.
type Runner struct {
	start StartFunc
	run   RunFunc
	cfg   Config
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]struct{} // markers of calls lost with their transport
}

// New returns a Runner over start and run. logger may be nil.
func New(start StartFunc, run RunFunc, cfg Config, logger *slog.Logger) *Runner {
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.DrainIdle <= 0 {
		cfg.DrainIdle = DefaultDrainIdle
	}
	if cfg.MaxDrain < cfg.DrainIdle {
		cfg.MaxDrain = max(DefaultMaxDrain, cfg.DrainIdle)
	}
	if cfg.Op == "" {
		cfg.Op = "remoteexec.Exec"
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{start: start, run: run, cfg: cfg, log: logger, pending: map[string]struct{}{}}
}

// CheckRequest validates what Exec will send: no NUL anywhere (it would
// cut an argument), a non-negative timeout, KEY=VALUE env entries whose
// keys are not reserved.
func CheckRequest(req opsapi.ExecRequest, reserved ...string) error {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return errors.New("NUL byte in command")
	}
	if strings.IndexByte(req.Cwd, 0) >= 0 {
		return errors.New("NUL byte in working directory")
	}
	if req.Timeout < 0 {
		return fmt.Errorf("negative timeout %v", req.Timeout)
	}
	for _, kv := range req.Env {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return fmt.Errorf("environment entry %q is not KEY=VALUE", kv)
		case strings.IndexByte(kv, 0) >= 0:
			return fmt.Errorf("NUL byte in environment entry %q", k)
		case k == CallKey:
			return fmt.Errorf("environment variable %s is reserved", k)
		}
		for _, r := range reserved {
			if k == r {
				return fmt.Errorf("environment variable %s is reserved", k)
			}
		}
	}
	return nil
}

// Exec runs req.Command in the absolute remote directory cwd, with
// markers (KEY=VALUE, e.g. the workspace's) added to its environment, and
// waits for it as opsapi.BashOperations.Exec describes. A missing cwd is
// ErrNotExist, a file ErrNotDir; a transport that fails to start the
// command or dies before the command's end is ErrUnavailable, and so is a
// request with Stdin, which the wrapper cannot carry. Each signal from
// req.Signals goes to the command's tree by a second command (see
// signalScript) once the wrapper has reported the command's group; Exec
// stops receiving, and waits for a signal on its way, before it returns.
func (r *Runner) Exec(ctx context.Context, req opsapi.ExecRequest, cwd string, markers ...string) (opsapi.ExecResult, error) {
	op := r.cfg.Op
	if err := CheckRequest(req); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrInvalid, err)
	}
	if req.Stdin != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, errNoStdin)
	}
	if req.TTY != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, errNoTTY)
	}
	if err := ctx.Err(); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, nil, err)
	}
	r.reapInBackground()

	call := CallKey + "=" + randomID()
	env := make([]string, 0, len(r.cfg.Env)+len(req.Env)+1+len(markers))
	env = append(append(append(append(env, r.cfg.Env...), req.Env...), call), markers...)
	how := "export"
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !isName(k) {
			how = "env"
		}
	}
	lead := "0"
	if r.cfg.TransportExit {
		lead = "1"
	}
	argv := append([]string{"sh", "-c", wrapperScript, "wsbroker", cwd, r.cfg.Shell, req.Command, how, lead}, env...)

	begin := time.Now()
	p, err := r.start(ctx, argv)
	if err != nil {
		if ctx.Err() != nil {
			return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, nil, ctx.Err())
		}
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
	}
	c := &execCall{r: r, p: p, req: req, marker: call, begin: begin}
	res, err := c.pump(ctx)
	if err != nil {
		return res, opsapi.E(op, req.Cwd, nil, err)
	}
	r.log.Debug("exec", "exit", res.ExitCode, "signal", res.Signal, "timedOut", res.TimedOut,
		"canceled", res.Canceled, "killed", res.Killed, "duration", res.Duration)
	return res, nil
}

// errNoStdin refuses Stdin: the wrapper's command has an empty stdin.
var errNoStdin = errors.New("stdin needs the in-box agent; this workspace's commands go through the fallback without it, which cannot carry stdin")

// errNoTTY refuses a terminal: the fallback runs commands on pipes.
var errNoTTY = errors.New("a terminal needs the in-box agent; this workspace's commands go through the fallback without it, which runs them on pipes")

// isName reports whether k is a shell variable name, which `export` takes.
func isName(k string) bool {
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// control events from the wrapper's stderr.
type control struct {
	kind string // "pgid", "pid", "leader", "exit", "nocwd", "notdir", "noperm", "eof"
	n    int
}

// readControl parses the wrapper's control lines; other lines (a login
// shell's noise) are skipped, long ones cut.
func readControl(r io.Reader, out chan<- control, quit <-chan struct{}) {
	send := func(c control) bool {
		select {
		case out <- c:
			return true
		case <-quit:
			return false
		}
	}
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "@wsbroker" {
			c := control{kind: f[1]}
			if len(f) >= 3 {
				c.n, _ = strconv.Atoi(f[2])
			}
			if !send(c) {
				return
			}
		}
		if err != nil {
			send(control{kind: "eof"})
			return
		}
	}
}

// execCall is one running command.
type execCall struct {
	r      *Runner
	p      Process
	req    opsapi.ExecRequest
	marker string
	begin  time.Time

	// The command's process group (or, pidOnly, its pid) as the wrapper
	// reports it; set once, before pgidKnown is closed.
	pgid      atomic.Int64
	pidOnly   atomic.Bool
	pgidKnown chan struct{}
}

// cwdErrors end a call whose directory could not be entered.
var cwdErrors = map[string]error{
	"nocwd":  opsapi.ErrNotExist,
	"notdir": opsapi.ErrNotDir,
	"noperm": opsapi.ErrPermission,
}

// pump relays output until the command has exited and its output has gone
// quiet (or a cap is hit), killing the tree on deadline or cancel.
func (c *execCall) pump(ctx context.Context) (opsapi.ExecResult, error) {
	cfg := c.r.cfg
	c.pgidKnown = make(chan struct{})
	quit := make(chan struct{})
	defer close(quit)
	ctl := make(chan control, 4)
	go readControl(c.p.Stderr(), ctl, quit)
	events := make(chan execpump.Event)
	go c.watch(ctl, events, quit)
	stopSignals := c.relaySignals()

	res, err := execpump.Run(ctx, c.p.Stdout(), events, execpump.Config{
		Output:    c.req.Output,
		Timeout:   c.req.Timeout,
		DrainIdle: cfg.DrainIdle,
		MaxDrain:  cfg.MaxDrain,
		Kill:      c.kill,
		GiveUp:    giveUpAfterKill,
		Close:     func() { c.p.Close() },
		CloseWait: time.Second,
	})
	stopSignals()
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	if res.Abandoned {
		c.r.log.Warn("command survived its kill; abandoning it", "pgid", c.pgid.Load())
		c.r.remember(c.marker)
	}
	res.Duration = time.Since(c.begin)
	if res.StatusKnown {
		// The exit line already gave the status; Wait only releases the
		// transport's resources, so its result is of no further use.
		go func() { _, _ = c.p.Wait() }()
		return res.ExecResult, nil
	}
	return c.transportStatus(res.ExecResult)
}

// watch turns the wrapper's control lines and the transport's report of
// the exit into the pump's events, until both have ended or the call is
// over.
func (c *execCall) watch(ctl <-chan control, events chan<- execpump.Event, quit <-chan struct{}) {
	send := func(ev execpump.Event) bool {
		select {
		case events <- ev:
			return true
		case <-quit:
			return false
		}
	}
	// exitC is the transport's report of the exit, once the wrapper has
	// become the command (a "leader" line); until then the wrapper's exit
	// line says it.
	var exitC <-chan Status
	leader, sawExit := false, false
	for ctl != nil || exitC != nil {
		var ev execpump.Event
		select {
		case <-quit:
			return
		case cev := <-ctl:
			switch cev.kind {
			case "pgid", "pid", "leader":
				c.learnGroup(cev)
				if cev.kind == "leader" && !leader {
					ex, ok := c.p.(Exiter)
					if !ok {
						c.r.remember(c.marker)
						send(execpump.Event{Fatal: true, Err: fmt.Errorf("%w: the transport cannot report the exit of a command that leads its group", opsapi.ErrUnavailable)})
						return
					}
					leader, exitC = true, ex.Exited()
				}
				continue
			case "nocwd", "notdir", "noperm":
				ev = execpump.Event{Err: cwdErrors[cev.kind]}
			case "exit":
				sawExit = true
				ev = execpump.Event{Exited: true, Status: &execpump.Status{Code: cev.n, Signal: signalOfCode(cev.n)}}
			case "eof":
				ctl = nil
				if sawExit || leader {
					continue
				}
				// The wrapper is gone without a word: the transport
				// died, or someone killed it.
				ev = execpump.Event{Exited: true}
			default:
				continue
			}
		case st, ok := <-exitC:
			exitC = nil
			// The transport ended without a status: as a wrapper gone
			// without a word, above.
			ev = execpump.Event{Exited: true}
			if ok {
				sawExit = true
				if st.Signal == "" {
					st.Signal = signalOfCode(st.Code)
				}
				ev.Status = &execpump.Status{Code: st.Code, Signal: st.Signal}
			}
		}
		if !send(ev) {
			return
		}
	}
}

// signalOfCode names the signal of an exit status above 128.
func signalOfCode(code int) string {
	if code > 128 {
		return SignalName(code - 128)
	}
	return ""
}

// learnGroup records the first group (or pid) the wrapper reports.
func (c *execCall) learnGroup(ev control) {
	select {
	case <-c.pgidKnown:
		return
	default:
	}
	c.pgid.Store(int64(ev.n))
	c.pidOnly.Store(ev.kind == "pid")
	close(c.pgidKnown)
}

// kill kills the command's tree through the RunFunc. The group id comes
// first thing; a command killed before it arrives is still found by its
// marker.
func (c *execCall) kill() int {
	t := time.NewTimer(c.r.cfg.KillGrace)
	defer t.Stop()
	select {
	case <-c.pgidKnown:
	case <-t.C:
	}
	pgid := int(c.pgid.Load())
	n, err := c.r.kill(pgid, c.pidOnly.Load(), c.marker)
	if err != nil {
		c.r.log.Warn("kill", "pgid", pgid, "err", err)
	}
	return n
}

// relaySignals sends each signal of req.Signals to the command's tree,
// from the moment the wrapper reports its group until the returned stop,
// which waits for a signal on its way: none is sent after Exec returns. A
// signal sent before the group is known waits in the channel until it is
// (the wrapper reports it before the command can exit).
func (c *execCall) relaySignals() (stop func()) {
	sigs := c.req.Signals
	if sigs == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-c.pgidKnown:
		case <-done:
			return
		}
		for {
			select {
			case <-done:
				return
			case sig, ok := <-sigs:
				if !ok {
					return
				}
				select {
				case <-done: // the call is over: drop it
					return
				default:
				}
				c.signal(sig)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// signal sends sig to the command's tree through the RunFunc; a failure
// drops it, as opsapi.ExecRequest.Signals says.
func (c *execCall) signal(sig syscall.Signal) {
	if sig < 1 || sig > 64 {
		c.r.log.Warn("dropping a signal out of range", "signal", int(sig))
		return
	}
	pgid := int(c.pgid.Load())
	if err := c.r.signal(pgid, c.pidOnly.Load(), c.marker, sig); err != nil {
		c.r.log.Warn("signal", "pgid", pgid, "signal", SignalName(int(sig)), "err", err)
	}
}

// transportStatus asks the transport how the wrapper ended when no exit
// line said it.
func (c *execCall) transportStatus(res opsapi.ExecResult) (opsapi.ExecResult, error) {
	c.p.Close()
	st, err := c.p.Wait()
	if err != nil || st.Code == -1 {
		c.r.remember(c.marker)
		if err == nil {
			err = errors.New("remote command ended without an exit status")
		}
		return res, fmt.Errorf("%w: connection lost while the command ran: %w", opsapi.ErrUnavailable, err)
	}
	res.ExitCode, res.Signal = st.Code, st.Signal
	return res, nil
}

// remember records the marker of a call whose processes may have outlived
// their transport, for Reap.
func (r *Runner) remember(marker string) {
	r.mu.Lock()
	r.pending[marker] = struct{}{}
	r.mu.Unlock()
}

// Reap kills the processes of calls lost with their transport; it returns
// how many it killed. Markers whose kill fails stay for the next Reap.
func (r *Runner) Reap(ctx context.Context) (int, error) {
	r.mu.Lock()
	markers := make([]string, 0, len(r.pending))
	for m := range r.pending {
		markers = append(markers, m)
	}
	r.mu.Unlock()
	total := 0
	var errs []error
	for _, m := range markers {
		n, err := r.kill(0, false, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		total += n
		r.mu.Lock()
		delete(r.pending, m)
		r.mu.Unlock()
	}
	return total, errors.Join(errs...)
}

// reapInBackground starts a Reap when calls are pending and none runs.
func (r *Runner) reapInBackground() {
	r.mu.Lock()
	n := len(r.pending)
	r.mu.Unlock()
	if n == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.KillGrace+30*time.Second)
		defer cancel()
		if n, err := r.Reap(ctx); n > 0 || err != nil {
			r.log.Info("reaped processes of lost calls", "killed", n, "err", err)
		}
	}()
}

// KillMarked kills every process whose environment holds marker (KEY=VALUE)
// with the usual escalation, e.g. when a workspace is destroyed.
func (r *Runner) KillMarked(ctx context.Context, marker string) (int, error) {
	if marker == "" || strings.IndexByte(marker, 0) >= 0 || !strings.Contains(marker, "=") {
		return 0, opsapi.E(r.cfg.Op, "", opsapi.ErrInvalid, fmt.Errorf("bad marker %q", marker))
	}
	return r.killCtx(ctx, 0, false, marker)
}

func (r *Runner) kill(pgid int, pidOnly bool, marker string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.KillGrace+30*time.Second)
	defer cancel()
	return r.killCtx(ctx, pgid, pidOnly, marker)
}

// signalTimeout bounds one run of the signal script, and so how long Exec
// may wait for a signal on its way when it returns.
const signalTimeout = 10 * time.Second

// signal runs the signal script through the RunFunc.
func (r *Runner) signal(pgid int, pidOnly bool, marker string, sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	out, err := r.run(ctx, []string{"sh", "-c", signalScript, "wsbroker", killMode(pidOnly),
		strconv.Itoa(max(pgid, 0)), marker, strconv.Itoa(int(sig))})
	if err == nil && !bytes.Contains(out, []byte("@wsbroker signalled ")) {
		err = fmt.Errorf("signal script gave no count: %q", bytes.TrimSpace(out))
	}
	return err
}

// killMode is the scripts' MODE: "pid" when the wrapper could not start
// the command in a group of its own (no setsid).
func killMode(pidOnly bool) string {
	if pidOnly {
		return "pid"
	}
	return "group"
}

// killCtx runs the kill script through the RunFunc.
func (r *Runner) killCtx(ctx context.Context, pgid int, pidOnly bool, marker string) (int, error) {
	mode := killMode(pidOnly)
	graceMS := strconv.FormatInt(r.cfg.KillGrace.Milliseconds(), 10)
	pg := strconv.Itoa(max(pgid, 0))
	// The script gets its grace and a bounded slack, not the whole kill's
	// time: near a process limit its forks fail and bash's fork retry
	// sleeps for seconds at a time, so it may run past any deadline while
	// killing nothing. The sweep below then still gets to run.
	sctx, cancel := context.WithTimeout(ctx, r.cfg.KillGrace+killScriptSlack)
	out, err := r.run(sctx, []string{"sh", "-c", killScript, "wsbroker", mode, pg, marker, graceMS})
	cancel()
	n, err := killedCount(out, err)
	if ctx.Err() != nil {
		return n, err
	}
	if err != nil {
		r.log.Warn("the kill script failed (process limit reached?); killing with shell builtins only", "err", err)
	}
	// Then a sweep that needs no fork: near a process limit the script's
	// own forks fail (and a scan that failed looks like one that found
	// nothing), while a fork bomb refills whatever it kills. The sweep
	// stops what is left round by round, so nothing can fork, and kills
	// it all; after a clean kill it finds nothing.
	more, serr := r.sweep(ctx, mode, pg, marker, err != nil)
	switch {
	case serr == nil:
		return n + more, nil
	case err == nil:
		r.log.Warn("the kill sweep failed", "err", serr)
		return n, nil
	}
	return 0, fmt.Errorf("kill script: %w; sweep: %w", err, serr)
}

// killScriptSlack is how long the kill script may run past its grace
// before the sweep takes over. Var for tests.
var killScriptSlack = 12 * time.Second

// sweepRetry is the pause between attempts to start the sweep: at a full
// process limit even starting it can fail (a docker exec's runc forks
// inside the container) until the bomb frees a slot, which may take as
// long as bash's fork retry sleeps (seconds, doubling); the attempts go on
// until the kill's own deadline.
const sweepRetry = 100 * time.Millisecond

// sweep runs noForkKillScript, again while it cannot start. When the kill
// script could not run (scriptFailed), or the sweep once failed to start,
// it first borrows the sandbox's Headroom, if it lends any, until done.
func (r *Runner) sweep(ctx context.Context, mode, pg, marker string, scriptFailed bool) (int, error) {
	borrowed := false
	var restore func()
	defer func() {
		if restore != nil {
			restore()
		}
	}()
	for attempt := 1; ; attempt++ {
		if !borrowed && r.cfg.Headroom != nil && (scriptFailed || attempt > 1) {
			borrowed = true
			var err error
			if restore, err = r.cfg.Headroom(ctx); err != nil {
				r.log.Warn("no headroom for the kill sweep", "err", err)
			}
		}
		n, err := killedCount(r.run(ctx, []string{"bash", "-c", noForkKillScript, "wsbroker", mode, pg, marker}))
		if err == nil || ctx.Err() != nil ||
			errors.Is(err, opsapi.ErrUnavailable) || errors.Is(err, opsapi.ErrNotExist) {
			return n, err // done, or the transport (not the limit) failed
		}
		select {
		case <-ctx.Done():
		case <-time.After(sweepRetry):
		}
	}
}

// killedCount reads a kill script's "@wsbroker killed N".
func killedCount(out []byte, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if n, ok := strings.CutPrefix(line, "@wsbroker killed "); ok {
			k, _ := strconv.Atoi(strings.TrimSpace(n))
			return k, nil
		}
	}
	return 0, fmt.Errorf("kill script gave no count: %q", bytes.TrimSpace(out))
}

// linuxSignals names Linux's signal numbers (the remote side's, whatever
// the broker runs on).
var linuxSignals = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
	20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
	26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// SignalName is Linux's name for signal n, e.g. 15 → "SIGTERM"; real-time
// signals are "SIGRTMIN+k"; anything else is "".
func SignalName(n int) string {
	switch {
	case n > 0 && n < len(linuxSignals):
		return linuxSignals[n]
	case n >= 34 && n <= 64:
		return "SIGRTMIN+" + strconv.Itoa(n-34)
	}
	return ""
}

// ShellJoin quotes argv for a POSIX shell, e.g. for an SSH exec request,
// which the remote login shell parses.
func ShellJoin(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Quote(a))
	}
	return b.String()
}

// Quote quotes s as one POSIX shell word.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
