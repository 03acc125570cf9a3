//go:build linux

package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/killtree"
)

// Reap is the reaper's main (see reapers.go). It readies itself, then
// serves jobs from the control socket at fd 3 one at a time, each until
// its subtree is empty, writing status lines ("exit N", "killed N", why
// the command could not start, then "idle") to the job's status pipe. It
// returns the exit code of the reaper itself: 0 when the agent closed the
// control socket.
func Reap(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "usage: wsb-agent reap, with a control socket on fd 3 (started by the agent)")
		return 2
	}
	// Everything a command need not wait for happens before its job comes.
	syscall.CloseOnExec(3)
	reserveThreads(reservedThreads)
	subreaperErr := killtree.BecomeSubreaper()
	// Kills come on the control socket; signals from the workspace's
	// commands (the same user) must not end the reaper. Catching every
	// signal also undoes any the reaper inherited ignored (a shell's
	// background job ignores SIGINT and SIGQUIT): the command starts with
	// every disposition at its default.
	absorbSignals()
	resetIgnored()
	// SIGCHLD wakes serve. Asked for once for the reaper's life: a
	// signal.Stop per job waited, yielding in a loop, for the runtime's
	// signal goroutine to go idle, a fifth of the reaper's CPU per job.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)

	msgs := make(chan ctlItem, 16)
	gone := make(chan struct{})
	go readCtl(3, msgs, gone)
	for m := range msgs {
		if m.job == nil {
			continue // a kill or signal for a job already done
		}
		j := *m.job
		if subreaperErr != nil {
			j.say("start: subreaper: %v", subreaperErr)
			return 1
		}
		runJob(j, chld, msgs, gone)
		j.say("idle")
		j.status.Close()
	}
	return 0 // the agent closed the control socket
}

// resetIgnored sets every signal the reaper still ignores back to its
// default action. absorbSignals cannot: Go lets no program catch the
// few its runtime reserves (32 to 34), and an ignored one would stay
// ignored in the command (CI's make left signals 32 and 33 ignored).
func resetIgnored() {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	var mask uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	var dfl [4]uint64 // struct sigaction, all zero: SIG_DFL, no flags, empty mask
	for sig := 1; sig <= 64; sig++ {
		if mask&(1<<(sig-1)) != 0 {
			_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		}
	}
}

// ctlJob is a job with its streams; in is nil without stdin of its own.
type ctlJob struct {
	reapJob
	out, errw, status, in *os.File
}

// ctlItem is one message from the agent. One channel carries them all in
// the order sent: a kill or signal that follows a job is never taken
// before it (and dropped as stale) when both wait.
type ctlItem struct {
	job  *ctlJob
	kill uint64
	sig  *sigMsg
}

// refuse answers a job that came while another runs (the agent sends
// jobs to idle reapers only): it could not start.
func (j ctlJob) refuse() {
	j.say("start: the reaper is busy")
	closeFiles(j.out, j.errw, j.status, j.in)
}

func (j ctlJob) say(format string, a ...any) {
	fmt.Fprintf(j.status, format+"\n", a...)
}

// runJob starts the job's command and serves its subtree until empty.
func runJob(j ctlJob, chld <-chan os.Signal, msgs <-chan ctlItem, gone <-chan struct{}) {
	defer j.out.Close()
	defer j.errw.Close()
	stdin := os.Stdin // /dev/null, as the agent started the reaper
	if j.in != nil {
		defer j.in.Close()
		stdin = j.in
	}
	if why := checkDir(j.Cwd); why != "" {
		j.say("%s", why)
		return
	}
	// The command's PATH finds its program, as its shell would.
	os.Clearenv()
	for _, kv := range j.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			_ = os.Setenv(k, v)
		}
	}
	prog, err := exec.LookPath(j.Argv[0])
	if err != nil {
		j.say("start: %v", err)
		return
	}
	// A group of its own, so that the command's group is never the
	// reaper's; on a terminal, a session of its own (whose leader cannot
	// also setpgid) with the terminal, its stdin, as controlling terminal:
	// the terminal's Ctrl-C and SIGWINCH go to its foreground group.
	sys := &syscall.SysProcAttr{Setpgid: true}
	if j.TTY {
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	proc, err := os.StartProcess(prog, j.Argv, &os.ProcAttr{
		Dir:   j.Cwd,
		Env:   os.Environ(),
		Files: []*os.File{stdin, j.out, j.errw},
		Sys:   sys,
	})
	if err != nil {
		j.say("start: %v", err)
		return
	}
	// The reaper holds no end of the command's output or input: the
	// streams end when the last of its processes closes them (the agent
	// sees EPIPE on stdin then).
	j.out.Close()
	j.errw.Close()
	if j.in != nil {
		j.in.Close()
	}
	var smu sync.Mutex // serve's goroutine and reap callbacks both speak
	say := func(format string, a ...any) {
		smu.Lock()
		defer smu.Unlock()
		j.say(format, a...)
	}
	serve(proc.Pid, j.ID, chld, msgs, gone, time.Duration(j.GraceMS)*time.Millisecond, say)
}

// serve reaps the subtree until it is empty, reporting the main child's
// exit, signals it on a signal for job id, and kills it all on a kill of
// job id or when the agent is gone. One goroutine does it all, woken by
// SIGCHLD: a fork bomb below makes zombies without pause, and a loop
// blocked in wait4 would keep the kill from ever being scheduled.
func serve(main int, id uint64, chld <-chan os.Signal, msgs <-chan ctlItem, gone <-chan struct{}, grace time.Duration, say func(string, ...any)) {
	reap := func() bool { return reapReady(main, func(code int) { say("exit %d", code) }) }
	tick := time.NewTicker(time.Second) // in case a SIGCHLD was merged away
	defer tick.Stop()
	killAll := func() {
		n, err := killtree.KillSubtree(grace, func() { reap() })
		if err != nil {
			fmt.Fprintln(os.Stderr, "wsb-agent reap:", err)
		}
		say("killed %d", n)
	}
	for reap() {
		select {
		case <-chld:
		case <-tick.C:
		case m, ok := <-msgs:
			switch {
			case !ok:
				msgs = nil // gone is closed too
			case m.job != nil:
				m.job.refuse()
			case m.kill == id:
				killAll()
			case m.sig != nil && m.sig.ID == id:
				signalSubtree(syscall.Signal(m.sig.Sig))
			}
		case <-gone:
			gone = nil // nobody reads the output anymore
			killAll()
		}
	}
}

// readCtl reads the agent's messages on the control socket ctl until it
// ends, when it closes gone and msgs.
func readCtl(ctl int, msgs chan<- ctlItem, gone chan<- struct{}) {
	defer close(msgs)
	defer close(gone)
	for {
		m, files, err := readCtlMsg(ctl)
		switch {
		case err != nil:
			for _, f := range files {
				f.Close()
			}
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "wsb-agent reap:", err)
			}
			return
		case m.Job != nil && len(files) == jobFiles(m.Job) && len(m.Job.Argv) > 0:
			j := &ctlJob{reapJob: *m.Job, out: files[0], errw: files[1], status: files[2]}
			if m.Job.Stdin {
				j.in = files[3]
			}
			msgs <- ctlItem{job: j}
		case m.Kill != 0 && len(files) == 0:
			msgs <- ctlItem{kill: m.Kill}
		case m.Signal != nil && len(files) == 0:
			if m.Signal.Sig < 1 || m.Signal.Sig > MaxSignal {
				// The agent checks; a bad one is dropped, not worth the
				// command it would end.
				fmt.Fprintln(os.Stderr, "wsb-agent reap: dropped signal", m.Signal.Sig)
				continue
			}
			msgs <- ctlItem{sig: m.Signal}
		default:
			closeFiles(files...)
			fmt.Fprintln(os.Stderr, "wsb-agent reap: a bad message from the agent")
			return
		}
	}
}

// readCtlMsg reads one message (reapers.go's send); descriptors arrive
// close-on-exec.
func readCtlMsg(ctl int) (ctlMsg, []*os.File, error) {
	var m ctlMsg
	hdr := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(maxJobFiles*4))
	n, oobn, _, _, err := unix.Recvmsg(ctl, hdr, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return m, nil, fmt.Errorf("control socket: %w", err)
	}
	if n == 0 {
		return m, nil, io.EOF
	}
	var files []*os.File
	if oobn > 0 {
		fds, err := parseRights(oob[:oobn])
		if err != nil {
			return m, nil, fmt.Errorf("control socket: %w", err)
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "stream"))
		}
	}
	if err := readFull(ctl, hdr[n:]); err != nil {
		return m, files, err
	}
	size := binary.BigEndian.Uint32(hdr)
	if size > maxCtlMsg {
		return m, files, fmt.Errorf("control socket: a message of %d bytes", size)
	}
	body := make([]byte, size)
	if err := readFull(ctl, body); err != nil {
		return m, files, err
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, files, fmt.Errorf("control socket: %w", err)
	}
	return m, files, nil
}

// maxJobFiles is the most descriptors a job carries: stdout, stderr,
// status and stdin.
const maxJobFiles = 4

// jobFiles is how many descriptors job comes with.
func jobFiles(job *reapJob) int {
	if job.Stdin {
		return 4
	}
	return 3
}

// readFull reads len(p) bytes from fd, which blocks.
func readFull(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Read(fd, p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("control socket: %w", io.ErrUnexpectedEOF)
		}
		p = p[n:]
	}
	return nil
}

// parseRights returns the descriptors of the SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return nil, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// reapReady collects every child that has ended, without waiting,
// reporting the main child's status; it returns false once no child is
// left.
func reapReady(main int, exited func(code int)) bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return false // ECHILD: the subtree is empty
		case pid == 0:
			return true // children left, none ended
		case pid != main:
			continue
		case ws.Exited():
			exited(ws.ExitStatus())
		case ws.Signaled():
			exited(128 + int(ws.Signal()))
		}
	}
}

// checkDir says why cwd cannot be a command's directory, "" when it can.
func checkDir(cwd string) string {
	fi, err := os.Stat(cwd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "nocwd"
	case errors.Is(err, fs.ErrPermission):
		return "noperm"
	case err != nil:
		return "start: " + err.Error()
	case !fi.IsDir():
		return "notdir"
	}
	if err := syscall.Access(cwd, 1); err != nil { // X_OK: may it be entered?
		return "noperm"
	}
	return ""
}
