package local

import (
	"errors"
	"os/exec"

	"github.com/wsbroker/wsbroker/backends/local/sandbox"
)

// HoldStarts makes every command start wait until the returned release
// is called (once), and reports on started each start that began
// waiting. It undoes itself with the returned restore.
func HoldStarts() (started <-chan struct{}, release, restore func()) {
	orig := startWith
	begun := make(chan struct{}, 16)
	gate := make(chan struct{})
	startWith = func(sp *sandbox.Spawner, cmd *exec.Cmd, entered func()) error {
		begun <- struct{}{}
		<-gate
		return orig(sp, cmd, entered)
	}
	return begun, func() { close(gate) }, func() { startWith = orig }
}

// NoLoopDevices makes the backends built until restore act as on a host
// that cannot give workspaces filesystems of their own.
func NoLoopDevices() (restore func()) {
	orig := probeDisks
	probeDisks = func(string) error { return errors.New("no loop devices (test)") }
	return func() { probeDisks = orig }
}

// AfterStart calls f with the pid of every command started, once its
// start has returned, until restore.
func AfterStart(f func(pid int)) (restore func()) {
	orig := startWith
	startWith = func(sp *sandbox.Spawner, cmd *exec.Cmd, entered func()) error {
		err := orig(sp, cmd, entered)
		if err == nil {
			f(cmd.Process.Pid)
		}
		return err
	}
	return func() { startWith = orig }
}
