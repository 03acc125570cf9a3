package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/backends/local/cgroups"
	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/internal/procstart"
	"github.com/wsbroker/wsbroker/killtree"
	"github.com/wsbroker/wsbroker/opsapi"
)

// basePath is the PATH every command starts with.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Environment keys the backend sets itself.
const (
	callKey      = "WSBROKER_CALL"
	workspaceKey = "WSBROKER_WORKSPACE"
)

// Exec runs req.Command as `Shell -c Command` in its own process group,
// with stdout and stderr on one pipe (so their interleaving is kept) and
// stdin from /dev/null, or from req.Stdin through a pipe of its own
// (closed at req.Stdin's end, and when Exec returns). Each signal on
// req.Signals goes to the command's tree while the call runs (see
// call.signal). The environment is a minimal base (PATH, HOME =
// the root, LANG=C.UTF-8, TERM=dumb), then req.Env, then two markers:
// WSBROKER_CALL (random per call) and WSBROKER_WORKSPACE, by which
// processes that left the group are still found and killed.
//
// With req.TTY the command runs on a pseudo-terminal instead (see
// terminal): it leads a session of its own (its group's id still its
// pid), the slave is its stdin, stdout and stderr and its controlling
// terminal, req.Stdin is typed at the master, whose output is pumped as
// the pipe's would be (its EIO, once no one holds the slave, ends it),
// and each size from req.Resize is applied while the call runs.
//
// When req.Timeout expires or ctx ends, the group and every process with
// the call's marker get SIGTERM, KillGrace, SIGKILL; the result has
// TimedOut or Canceled, Killed and 128+N for a signal death. After the
// shell exits, output is drained until it has been quiet for DrainIdle
// (the pipe empty), for at most MaxDrain and never past the deadline, so
// a background child holding the pipe neither hangs the call nor loses
// late output; such children keep running (as in pi) until Destroy. Time
// spent waiting for a slow caller counts towards neither. Output is written from
// one goroutine, serially, and never after Exec returns.
//
// When the backend sandboxes (a root broker on Linux, sandbox.mode auto
// or on), the workspace's spawner (package sandbox) starts the command:
// the workspace's own uid, no_new_privs, private /tmp, the state directory
// hidden, loopback-only network, Landlock and seccomp. Otherwise it runs
// with the broker's privileges and reaches anything the broker's user
// can; only the working directory is confined.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	const op = "local.Exec"
	if err := checkExecRequest(req); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrInvalid, err)
	}
	dir, err := w.openCwd(op, req.Cwd)
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	defer dir.Close()
	if err := ctx.Err(); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, nil, err)
	}

	callMarker := callKey + "=" + randomID()
	cmd, unwrap, err := w.command(req, callMarker, dir)
	if err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
	}
	defer unwrap()
	term, stdin, err := newInput(cmd, req)
	if err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
	}
	// Ends the copies at their next write, whatever req.Stdin does.
	defer term.close()
	defer stdin.close()
	cg, entered, done, err := w.commandGroup(cmd, callMarker)
	if err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
	}
	defer done()
	exit := prepareExitWait(cmd)
	r, begin, err := w.start(op, req.Cwd, cmd, term, entered)
	if err != nil {
		exit.close()
		if cg != nil {
			_ = cg.Delete()
		}
		return opsapi.ExecResult{}, err
	}
	dir.Close()
	stdin.feed(req.Stdin)
	term.feed(req.Stdin)
	defer term.follow(req.Resize)()

	c := &call{w: w, cmd: cmd, req: req, marker: callMarker, begin: begin, cg: cg, exit: exit}
	if req.Started != nil && cg != nil {
		req.Started(c.usage)
	}
	res := c.run(ctx, r)
	if cg != nil {
		res.OOMKilled = cg.OOMKills() > 0
		res.MemoryLimit = cg.MemoryLimit()
		// Background children that outlive the command keep its group
		// (listed and killed through Processes / KillProcesses, and by
		// Destroy); an empty one goes now.
		if cg.Empty() {
			if err := cg.Delete(); err != nil {
				w.logger.Warn("removing a command's cgroup", "err", err)
			}
		}
	}
	w.forget(cmd.Process.Pid, res)
	w.logger.Debug("exec", "exit", res.ExitCode, "signal", res.Signal, "timedOut", res.TimedOut,
		"canceled", res.Canceled, "oomKilled", res.OOMKilled, "killed", res.Killed, "duration", res.Duration)
	return res, nil
}

// openCwd opens the command's working directory. The shell changes into
// it through this descriptor, opened via the root, so a link swapped in
// after the check cannot move it out.
func (w *Workspace) openCwd(op, cwd string) (*os.File, error) {
	rel, err := w.rel(op, cwd)
	if err != nil {
		return nil, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return nil, mapErr(op, cwd, err)
	}
	dir, err := w.fsroot.Open(canon)
	if err != nil {
		return nil, mapErr(op, cwd, err)
	}
	if fi, err := dir.Stat(); err != nil {
		dir.Close()
		return nil, mapErr(op, cwd, err)
	} else if !fi.IsDir() {
		dir.Close()
		return nil, opsapi.E(op, cwd, opsapi.ErrNotDir, nil)
	}
	return dir, nil
}

// command is `Shell -c Command` in dir, in its own process group, with
// the minimal base environment, req.Env and the two markers. Sandboxed,
// the workspace's spawner starts it (see start), and the directory is
// given by path: the descriptor belongs to the broker's mount namespace,
// not the commands'. unwrap undoes what only the start needed.
func (w *Workspace) command(req opsapi.ExecRequest, callMarker string, dir *os.File) (cmd *exec.Cmd, unwrap func(), err error) {
	cmd = exec.Command(w.cfg.Shell, "-c", req.Command)
	cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", dir.Fd())
	cmd.Env = append(append([]string{
		"PATH=" + basePath,
		"HOME=" + w.root,
		"LANG=C.UTF-8",
		"TERM=dumb",
	}, req.Env...), callMarker, w.marker)
	killtree.Prepare(cmd)
	if w.b.sb != nil {
		// The path the kernel has for the directory opened through the
		// root.
		if cmd.Dir, err = os.Readlink(cmd.Dir); err != nil {
			return nil, nil, err
		}
	}
	return cmd, func() {}, nil
}

// commandGroup gives the command its own cgroup, inside the workspace's,
// which holds it and everything it starts from its first instruction on.
// Without cgroups the group is nil. entered returns once the started
// command is in its group (cgroups.Entry.Wait); done undoes what only the
// start needed.
func (w *Workspace) commandGroup(cmd *exec.Cmd, callMarker string) (cg *cgroups.Group, entered, done func(), err error) {
	if err := w.ensureGroup(); err != nil {
		return nil, nil, nil, err
	}
	if w.cg == nil {
		return nil, nil, func() {}, nil
	}
	name := "cmd-" + callMarker[len(callKey)+1:][:16]
	w.setActive(name, true)
	if cg, err = w.cg.Child(name, w.cfg.CommandLimits); err != nil {
		w.setActive(name, false)
		return nil, nil, nil, err
	}
	prepare := cg.Prepare
	if w.b.sb != nil {
		// The sandbox's filter refuses clone3, so no CLONE_INTO_CGROUP:
		// the command enters through descriptors opened here.
		prepare = cg.PrepareEntry
	}
	entry, err := prepare(cmd)
	if err != nil {
		_ = cg.Delete()
		w.setActive(name, false)
		return nil, nil, nil, err
	}
	return cg, entry.Wait, func() {
		entry.Release()
		w.setActive(name, false)
	}, nil
}

// start starts cmd with stdout and stderr on one pipe (so their
// interleaving is kept), or on term when it has one, and tracks its
// process group, unless the workspace is being destroyed. entered, when
// not nil, runs once cmd has started and before the next start may fork
// (see cgroups.Entry.Wait). It returns the output's read end: the pipe's,
// or the terminal's master.
//
// The fork runs under w.life shared, not under w.mu: on a loaded host a
// fork waits tens of milliseconds for its child to exec, and every file
// operation of the workspace takes w.mu.
func (w *Workspace) start(op, cwd string, cmd *exec.Cmd, term *terminal, entered func()) (*os.File, time.Time, error) {
	r, pw, err := outputPipe(cmd, term)
	if err != nil {
		return nil, time.Time{}, opsapi.E(op, cwd, nil, err)
	}
	// The command holds its own copy.
	defer pw.Close()
	w.givePipes(cmd)
	begin := time.Now()
	w.life.RLock()
	defer w.life.RUnlock()
	sp, err := w.spawner()
	if err == nil {
		err = startWith(sp, cmd, entered)
	}
	if err != nil {
		r.Close()
		if errors.Is(err, errDestroyed) {
			return nil, time.Time{}, opsapi.E(op, cwd, opsapi.ErrNotExist, err)
		}
		return nil, time.Time{}, opsapi.E(op, cwd, opsapi.ErrUnavailable, err)
	}
	w.mu.Lock()
	w.groups[cmd.Process.Pid] = struct{}{}
	w.mu.Unlock()
	return r, begin, nil
}

// outputPipe gives cmd its output's write end: term's slave, or a new
// pipe for stdout and stderr. It returns the read end and the broker's
// copy of the write end, to close once cmd started.
func outputPipe(cmd *exec.Cmd, term *terminal) (r, w *os.File, err error) {
	if term != nil {
		r, w = term.output()
		return r, w, nil
	}
	if r, w, err = os.Pipe(); err != nil {
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	return r, w, nil
}

// givePipes hands the command's pipes to the workspace's uid: a pipe
// belongs to its maker with mode 0600, and reopening one by path
// (/dev/stdin, /dev/stdout, /proc/self/fd/N, which `cat /dev/stdin` and
// `tee /dev/stderr` do) is checked against that owner. The pipes are the
// command's alone, so nothing else is opened up. So is a terminal's
// slave (root's, 0620 otherwise), which `bash -i` opens again as
// /dev/tty.
func (w *Workspace) givePipes(cmd *exec.Cmd) {
	if w.uid < 0 {
		return
	}
	for _, f := range []any{cmd.Stdin, cmd.Stdout} {
		if f, ok := f.(*os.File); ok {
			if err := f.Chown(w.uid, w.uid); err != nil {
				w.logger.Debug("handing a pipe to the workspace's uid", "err", err)
			}
		}
	}
}

var errDestroyed = errors.New("workspace destroyed")

// spawner is the workspace's spawner when sandboxed (made on the first
// command), nil when not, or errDestroyed.
func (w *Workspace) spawner() (*sandbox.Spawner, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.destroyed {
		return nil, errDestroyed
	}
	if w.b.sb == nil || w.sp != nil {
		return w.sp, nil
	}
	spec := w.b.sb.spec(w.root, w.b.tmpDir(w.id), w.uid)
	var memory int64
	if w.cg != nil {
		memory = w.cg.Limits().MemoryBytes
	}
	spec.ShmBytes = shmBytes(memory)
	sp, err := sandbox.NewSpawner(spec)
	if err != nil {
		return nil, err
	}
	w.sp = sp
	return sp, nil
}

// startWith starts cmd from sp, or from the broker itself when sp is nil.
// A variable so that a test can hold a start.
var startWith = func(sp *sandbox.Spawner, cmd *exec.Cmd, entered func()) error {
	if sp != nil {
		return sp.Start(cmd, entered)
	}
	return procstart.StartThen(cmd, entered)
}

func checkExecRequest(req opsapi.ExecRequest) error {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return errors.New("NUL byte in command")
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
		case k == callKey || k == workspaceKey:
			return fmt.Errorf("environment variable %s is reserved", k)
		}
	}
	return nil
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (w *Workspace) setActive(name string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		w.active[name] = true
	} else {
		delete(w.active, name)
	}
}

func (w *Workspace) running(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active[name]
}

// forget stops tracking a command's group once nothing is left in it.
func (w *Workspace) forget(pgid int, res opsapi.ExecResult) {
	// Usually the group is gone with the shell: one signal 0 says so,
	// where counting the members reads every process's stat (2 ms here).
	if !res.TimedOut && !res.Canceled && !killtree.GroupGone(pgid) {
		if n, err := killtree.GroupMembers(pgid); err != nil || n > 0 {
			return // background children stay tracked for Destroy
		}
	}
	w.mu.Lock()
	delete(w.groups, pgid)
	w.mu.Unlock()
}

// call is one running command.
type call struct {
	w      *Workspace
	cmd    *exec.Cmd
	req    opsapi.ExecRequest
	marker string
	begin  time.Time
	cg     *cgroups.Group // nil without cgroups
	exit   *exitWaiter
}

// run pumps output until the command has exited and its output has gone
// quiet (or a cap is hit), killing the tree on deadline or cancel, and
// relays req.Signals meanwhile.
func (c *call) run(ctx context.Context, r *os.File) opsapi.ExecResult {
	// Before the wait below can reap the shell: the relay's pidfd must
	// be the shell's.
	stop := c.relaySignals()
	defer stop()
	events := make(chan execpump.Event, 1)
	go func() {
		c.exit.wait() // on the poller: no thread held while the command runs
		err := c.cmd.Wait()
		events <- execpump.Event{Exited: true, Status: c.exitStatus(err)}
	}()
	res, _ := execpump.Run(ctx, r, events, execpump.Config{
		Output:    c.req.Output,
		Timeout:   c.req.Timeout,
		DrainIdle: c.w.cfg.DrainIdle,
		MaxDrain:  c.w.cfg.MaxDrain,
		Pending:   execpump.PipePending(r),
		Kill:      c.kill,
		Close:     func() { r.Close() }, // unblocks a pending Read
	})
	res.Duration = time.Since(c.begin)
	return res.ExecResult
}

// kill kills the command's tree: its cgroup, or its group and every
// process with its marker.
func (c *call) kill() int {
	var n int
	var err error
	if c.cg != nil {
		n, err = c.cg.KillAll(c.cmd.Process.Pid, c.w.cfg.KillGrace)
	} else {
		n, err = killtree.KillAll(c.cmd.Process.Pid, c.marker, c.w.cfg.KillGrace)
	}
	// The shell itself may have moved to another group.
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	if err != nil {
		c.w.logger.Warn("kill", "pgid", c.cmd.Process.Pid, "err", err)
	}
	return n
}

// relaySignals sends each signal of req.Signals to the command's tree
// until stop is called; stop returns once none is on its way.
func (c *call) relaySignals() (stop func()) {
	if c.req.Signals == nil {
		return func() {}
	}
	shell := watchShell(c.cmd.Process.Pid)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case sig, ok := <-c.req.Signals:
				if !ok {
					return
				}
				c.signal(sig, shell)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		shell.close()
	}
}

// signal sends sig to the command's tree, as kill finds it: its cgroup,
// or without one its process group and every process outside it that
// carries the call's marker or descends from the running shell (which
// catches a child that left the group and cleared its environment, while
// its parents live). Each process gets sig once; one that cannot be
// signalled is skipped.
func (c *call) signal(sig syscall.Signal, shell shellWatch) {
	if c.cg != nil {
		pids, err := c.cg.Signal(sig)
		if err != nil {
			c.w.logger.Debug("signal", "sig", sig, "err", err)
		}
		// A command that enters its cgroup itself (cgroup v1, or the
		// sandbox's entry) is outside it until its wrapper has written
		// its pid: a signal sent that early would reach no one.
		if shell.running() && !slices.Contains(pids, c.cmd.Process.Pid) {
			_ = c.cmd.Process.Signal(sig)
		}
		return
	}
	pgid := c.cmd.Process.Pid // the shell leads the group
	running := shell.running()
	// Listed before the group's signal, which may end the shell and
	// leave its children to another parent.
	outside, _ := killtree.MarkedPids(c.marker)
	if running {
		kids, _ := killtree.DescendantsOf(pgid)
		outside = append(append(outside, pgid), kids...)
	}
	// A running shell holds its group's id; once it has exited the id may
	// be an unrelated group's, so only one with a process of ours is hit.
	toGroup := running
	if !running {
		ok, err := killtree.GroupMarked(pgid, c.marker)
		toGroup = ok || err != nil
	}
	if toGroup {
		_ = killtree.SignalGroup(pgid, sig)
	}
	seen := map[int]bool{}
	for _, p := range outside {
		if g, err := syscall.Getpgid(p); seen[p] || err != nil || g == pgid {
			continue // already signalled, gone, or had it with the group
		}
		seen[p] = true
		_ = syscall.Kill(p, sig)
	}
}

// usage measures the command's tree: its cgroup's processes and memory.
func (c *call) usage() opsapi.Usage {
	pids, _ := c.cg.Procs()
	return opsapi.Usage{CPU: killtree.CPUTime(pids), MemoryBytes: c.cg.MemoryUsage()}
}

// exitStatus reads the exit code and signal from Wait's outcome.
func (c *call) exitStatus(err error) *execpump.Status {
	st := c.cmd.ProcessState
	if st == nil {
		c.w.logger.Warn("wait", "err", err)
		return &execpump.Status{Code: 1}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &execpump.Status{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
	}
	return &execpump.Status{Code: st.ExitCode()}
}

// killLeftovers kills, under one grace period, every process carrying the
// workspace's marker and every tracked group that still holds one (which
// catches members that cleared their environment but stayed in the
// group). A tracked group id with no marked member is left alone: the
// kernel may have given it to an unrelated group.
func (w *Workspace) killLeftovers(groups []int) (int, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		killed int
		errs   []error
	)
	add := func(n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		killed += n
		if err != nil && !errors.Is(err, errors.ErrUnsupported) {
			errs = append(errs, err)
		}
	}
	for _, g := range groups {
		if ok, _ := killtree.GroupMarked(g, w.marker); !ok {
			continue
		}
		wg.Go(func() { add(killtree.KillGroup(g, w.cfg.KillGrace)) })
	}
	add(killtree.KillMarked(w.marker, w.cfg.KillGrace))
	wg.Wait()
	return killed, errors.Join(errs...)
}

// stdinPipe carries req.Stdin to the command through a pipe: the sandbox's
// spawner passes only files through, and exec.Cmd would wait for its own
// copy from any other reader, which Exec must not (Stdin may never end).
// A nil *stdinPipe is stdin from /dev/null.
type stdinPipe struct{ r, w *os.File }

// newInput gives cmd its terminal when req.TTY asks for one (req.Stdin
// is then typed at it), else a pipe for req.Stdin, when set.
func newInput(cmd *exec.Cmd, req opsapi.ExecRequest) (*terminal, *stdinPipe, error) {
	if req.TTY != nil {
		term, err := newTerminal(cmd, req.TTY)
		return term, nil, err
	}
	stdin, err := newStdinPipe(cmd, req.Stdin)
	return nil, stdin, err
}

// newStdinPipe gives cmd a pipe for src, or nothing when src is nil.
func newStdinPipe(cmd *exec.Cmd, src io.Reader) (*stdinPipe, error) {
	if src == nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	cmd.Stdin = r
	return &stdinPipe{r: r, w: w}, nil
}

// feed copies src into the pipe until src ends or fails, then closes it:
// the command sees its stdin end. Call it once the command has started.
func (p *stdinPipe) feed(src io.Reader) {
	if p == nil {
		return
	}
	// The command holds its own copy; with the broker's gone, a command
	// that closed its stdin fails the copy's write (EPIPE, not an error)
	// instead of leaving it blocked.
	p.r.Close()
	copyInput(p.w, src, func() { p.w.Close() })
}

// copyInput copies src to dst in the background until src ends or fails,
// then calls end when set. Exec never waits for it (src may never end):
// closing dst ends the copy at its next write.
func copyInput(dst io.Writer, src io.Reader, end func()) {
	go func() {
		if end != nil {
			defer end()
		}
		_, _ = io.Copy(dst, src)
	}()
}

// close closes both ends; a copy still running fails at its next write.
func (p *stdinPipe) close() {
	if p == nil {
		return
	}
	p.r.Close()
	p.w.Close()
}
