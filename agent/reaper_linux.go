//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/killtree"
)

// Reap is the reaper's main: args are GRACE_MS SHELL CWD COMMAND, the
// environment is the command's, fd 3 receives status lines ("exit N",
// "killed N", or why the command could not start). It returns the exit
// code of the reaper itself.
func Reap(args []string) int {
	status := os.NewFile(3, "status")
	var smu sync.Mutex
	say := func(format string, a ...any) {
		smu.Lock()
		defer smu.Unlock()
		fmt.Fprintf(status, format+"\n", a...)
	}
	if len(args) != 4 || status == nil {
		fmt.Fprintln(os.Stderr, "usage: wsb-agent reap GRACE_MS SHELL CWD COMMAND (started by the agent)")
		return 2
	}
	graceMS, _ := strconv.ParseInt(args[0], 10, 64)
	shell, cwd, command := args[1], args[2], args[3]
	if why := checkDir(cwd); why != "" {
		say("%s", why)
		return 0
	}
	if err := killtree.BecomeSubreaper(); err != nil {
		say("start: subreaper: %v", err)
		return 1
	}
	// Signals for the reaper arrive before the child exists too.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT)

	proc, err := os.StartProcess(shell, []string{shell, "-c", command}, &os.ProcAttr{
		Dir:   cwd,
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stdout},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		say("start: %v", err)
		return 0
	}
	// The reaper holds no end of the command's output: the stream ends
	// when the last of its processes closes it.
	devnull, _ := os.Open(os.DevNull)
	for _, fd := range []int{0, 1, 2} {
		_ = syscall.Dup3(int(devnull.Fd()), fd, 0)
	}

	var killing sync.WaitGroup
	go func() {
		<-term
		killing.Add(1)
		defer killing.Done()
		n, err := killtree.KillSubtree(time.Duration(graceMS)*time.Millisecond, func() {})
		if err != nil {
			fmt.Fprintln(os.Stderr, "wsb-agent reap:", err)
		}
		say("killed %d", n)
	}()
	reapAll(proc.Pid, func(code int) { say("exit %d", code) })
	signal.Stop(term)
	killing.Wait()
	return 0
}

// reapAll waits for every process of the subtree (orphans come to the
// reaper) until none is left, reporting the main child's status.
func reapAll(main int, exited func(code int)) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return // ECHILD: the subtree is empty
		}
		if pid != main {
			continue
		}
		switch {
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
