//go:build linux

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/killtree"
)

// Reap is the reaper's main: args are GRACE_MS CWD, the command's argv is
// JSON in $WSB_REAP_ARGV, the rest of the
// environment is the command's, fd 3 receives status lines ("exit N",
// "killed N", or why the command could not start). It returns the exit
// code of the reaper itself.
func Reap(args []string) int {
	// The status pipe is the reaper's alone: the command must not inherit
	// it (it could forge an exit line).
	syscall.CloseOnExec(3)
	status := os.NewFile(3, "status")
	var smu sync.Mutex
	say := func(format string, a ...any) {
		smu.Lock()
		defer smu.Unlock()
		fmt.Fprintf(status, format+"\n", a...)
	}
	var argv []string
	if len(args) != 2 || status == nil || json.Unmarshal([]byte(os.Getenv(reapArgvKey)), &argv) != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: wsb-sftp-server reap GRACE_MS CWD, with $"+reapArgvKey+" (started by the agent)")
		return 2
	}
	os.Unsetenv(reapArgvKey)
	graceMS, _ := strconv.ParseInt(args[0], 10, 64)
	cwd := args[1]
	if why := checkDir(cwd); why != "" {
		say("%s", why)
		return 0
	}
	reserveThreads(reservedThreads)
	if err := killtree.BecomeSubreaper(); err != nil {
		say("start: subreaper: %v", err)
		return 1
	}
	// Signals for the reaper arrive before the child exists too.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT)
	// From here SIGTERM is a kill, not the reaper's death: the agent
	// holds a kill back until it reads this.
	say("ready")

	prog, err := exec.LookPath(argv[0])
	if err != nil {
		say("start: %v", err)
		return 0
	}
	proc, err := os.StartProcess(prog, argv, &os.ProcAttr{
		Dir:   cwd,
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		say("start: %v", err)
		return 0
	}
	// The reaper holds no end of the command's output: the streams end
	// when the last of its processes closes it.
	devnull, _ := os.Open(os.DevNull)
	for _, fd := range []int{0, 1, 2} {
		_ = syscall.Dup3(int(devnull.Fd()), fd, 0)
	}

	serve(proc.Pid, term, time.Duration(graceMS)*time.Millisecond, say)
	return 0
}

// serve reaps the subtree until it is empty, reporting the main child's
// exit, and kills it all when term fires. One goroutine does both, woken
// by SIGCHLD: a fork bomb below makes zombies without pause, and a loop
// blocked in wait4 would keep the kill from ever being scheduled.
func serve(main int, term <-chan os.Signal, grace time.Duration, say func(string, ...any)) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	reap := func() bool { return reapReady(main, func(code int) { say("exit %d", code) }) }
	tick := time.NewTicker(time.Second) // in case a SIGCHLD was merged away
	defer tick.Stop()
	for reap() {
		select {
		case <-chld:
		case <-tick.C:
		case <-term:
			n, err := killtree.KillSubtree(grace, func() { reap() })
			if err != nil {
				fmt.Fprintln(os.Stderr, "wsb-sftp-server reap:", err)
			}
			say("killed %d", n)
		}
	}
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
