package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/cgroups"
	"github.com/wsbroker/wsbroker/killtree"
	"github.com/wsbroker/wsbroker/opsapi"
)

// readBufSize is the one buffer command output passes through.
const readBufSize = 32 << 10

// basePath is the PATH every command starts with.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Environment keys the backend sets itself.
const (
	callKey      = "WSBROKER_CALL"
	workspaceKey = "WSBROKER_WORKSPACE"
)

// Exec runs req.Command as `Shell -c Command` in its own process group,
// with stdin from /dev/null and stdout and stderr on one pipe (so their
// interleaving is kept). The environment is a minimal base (PATH, HOME =
// the root, LANG=C.UTF-8, TERM=dumb), then req.Env, then two markers:
// WSBROKER_CALL (random per call) and WSBROKER_WORKSPACE, by which
// processes that left the group are still found and killed.
//
// When req.Timeout expires or ctx ends, the group and every process with
// the call's marker get SIGTERM, KillGrace, SIGKILL; the result has
// TimedOut or Canceled, Killed and 128+N for a signal death. After the
// shell exits, output is drained until it has been quiet for DrainIdle,
// for at most MaxDrain and never past the deadline, so a background child
// holding the pipe neither hangs the call nor loses late output; such
// children keep running (as in pi) until Destroy. Output is written from
// one goroutine, serially, and never after Exec returns.
//
// Exec is not a sandbox: the command runs with the broker's privileges
// and can reach anything the broker's user can. Only the working directory
// is confined.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	const op = "local.Exec"
	if err := checkExecRequest(req); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrInvalid, err)
	}
	rel, err := w.rel(op, req.Cwd)
	if err != nil {
		return opsapi.ExecResult{}, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return opsapi.ExecResult{}, mapErr(op, req.Cwd, err)
	}
	// The shell changes into the directory through a descriptor opened
	// via the root, so a link swapped in after the check cannot move it
	// out.
	dir, err := w.fsroot.Open(canon)
	if err != nil {
		return opsapi.ExecResult{}, mapErr(op, req.Cwd, err)
	}
	defer dir.Close()
	if fi, err := dir.Stat(); err != nil {
		return opsapi.ExecResult{}, mapErr(op, req.Cwd, err)
	} else if !fi.IsDir() {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrNotDir, nil)
	}
	if err := ctx.Err(); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, nil, err)
	}

	callMarker := callKey + "=" + randomID()
	cmd := exec.Command(w.cfg.Shell, "-c", req.Command)
	cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", dir.Fd())
	cmd.Env = append(append([]string{
		"PATH=" + basePath,
		"HOME=" + w.root,
		"LANG=C.UTF-8",
		"TERM=dumb",
	}, req.Env...), callMarker, w.marker)
	killtree.Prepare(cmd)

	// The command's own cgroup, inside the workspace's, holds it and
	// everything it starts from its first instruction on.
	var cg *cgroups.Group
	if err := w.ensureGroup(); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
	}
	if w.cg != nil {
		name := "cmd-" + callMarker[len(callKey)+1:][:16]
		w.setActive(name, true)
		defer w.setActive(name, false)
		if cg, err = w.cg.Child(name, w.cfg.CommandLimits); err != nil {
			return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
		}
		release, err := cg.Prepare(cmd)
		if err != nil {
			_ = cg.Delete()
			return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
		}
		defer release()
	}

	r, pw, err := os.Pipe()
	if err != nil {
		if cg != nil {
			_ = cg.Delete()
		}
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, nil, err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	begin := time.Now()
	w.mu.Lock()
	if w.destroyed {
		w.mu.Unlock()
		r.Close()
		pw.Close()
		if cg != nil {
			_ = cg.Delete()
		}
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrNotExist, errors.New("workspace destroyed"))
	}
	err = cmd.Start()
	if err == nil {
		w.groups[cmd.Process.Pid] = struct{}{}
	}
	w.mu.Unlock()
	pw.Close()
	if err != nil {
		r.Close()
		if cg != nil {
			_ = cg.Delete()
		}
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrUnavailable, err)
	}
	dir.Close()

	c := &call{w: w, cmd: cmd, req: req, marker: callMarker, begin: begin, cg: cg}
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
}

// run pumps output until the command has exited and its output has gone
// quiet (or a cap is hit), killing the tree on deadline or cancel.
func (c *call) run(ctx context.Context, r *os.File) opsapi.ExecResult {
	cfg := c.w.cfg
	var res opsapi.ExecResult

	waited := make(chan error, 1)
	go func() { waited <- c.cmd.Wait() }()

	// The reader hands each chunk over and waits until it has been
	// written, so one buffer suffices and writes stay serial.
	chunks := make(chan []byte)
	ack := make(chan struct{})
	readDone := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, readBufSize)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-quit:
					return
				}
				select {
				case <-ack:
				case <-quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		close(quit)
		r.Close() // unblocks a pending Read
		<-readDone
	}()

	var deadline <-chan time.Time
	if c.req.Timeout > 0 {
		t := time.NewTimer(c.req.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	var idleC, capC <-chan time.Time
	done := ctx.Done()

	var killDone chan int
	kill := func() {
		deadline, done = nil, nil
		killDone = make(chan int, 1)
		go func() {
			var n int
			var err error
			if c.cg != nil {
				n, err = c.cg.KillAll(c.cmd.Process.Pid, cfg.KillGrace)
			} else {
				n, err = killtree.KillAll(c.cmd.Process.Pid, c.marker, cfg.KillGrace)
			}
			// The shell itself may have moved to another group.
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			if err != nil {
				c.w.logger.Warn("kill", "pgid", c.cmd.Process.Pid, "err", err)
			}
			killDone <- n
		}()
	}

	readC := (<-chan struct{})(readDone) // nil once seen, so select skips it
	exited, eof, outputOK := false, false, c.req.Output != nil
	// Done once the shell has exited, any kill has finished, and the
	// output has ended or gone quiet (or hit its cap).
	for !exited || killDone != nil || !eof && (idleC != nil || capC != nil) {
		select {
		case b := <-chunks:
			if outputOK {
				if _, err := c.req.Output.Write(b); err != nil {
					outputOK = false // keep draining; the reader is gone
				}
			}
			ack <- struct{}{}
			if exited && idleC != nil {
				idle.Reset(cfg.DrainIdle)
			}
		case <-readC:
			eof, readC = true, nil
		case err := <-waited:
			exited = true
			c.exitStatus(&res, err)
			idle.Reset(cfg.DrainIdle)
			idleC = idle.C
			capT := time.NewTimer(cfg.MaxDrain)
			defer capT.Stop()
			capC = capT.C
		case <-deadline:
			res.TimedOut = true
			kill()
		case <-done:
			res.Canceled = true
			kill()
		case n := <-killDone:
			res.Killed += n
			killDone = nil
		case <-idleC:
			idleC, capC = nil, nil
		case <-capC:
			idleC, capC = nil, nil
		}
	}
	res.Duration = time.Since(c.begin)
	return res
}

// exitStatus fills the exit code and signal from Wait's outcome.
func (c *call) exitStatus(res *opsapi.ExecResult, err error) {
	st := c.cmd.ProcessState
	if st == nil {
		res.ExitCode = 1
		c.w.logger.Warn("wait", "err", err)
		return
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
		res.Signal = unix.SignalName(ws.Signal())
		return
	}
	res.ExitCode = st.ExitCode()
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
