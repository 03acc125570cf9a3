package procstart

import (
	"os/exec"
	"runtime"
)

// gate holds one token per start in progress.
var gate = make(chan struct{}, Slots())

// Slots is how many starts may run at once: GOMAXPROCS-1, at least one.
func Slots() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// Do runs start, which forks (exec.Cmd.Start, os.StartProcess), once
// fewer than Slots other starts are in progress, and returns its error.
// Before it, every descriptor above 2 is marked close-on-exec (on Linux),
// so that the child inherits none the broker did not hand it; a failure
// to mark them is an error and start does not run.
func Do(start func() error) error {
	gate <- struct{}{}
	defer func() { <-gate }()
	if err := closeInherited(); err != nil {
		return err
	}
	return start()
}

// Start is Do(cmd.Start).
func Start(cmd *exec.Cmd) error { return Do(cmd.Start) }

// StartThen is Start, and then, when cmd started and entered is not nil,
// entered before the slot is given back: for a command that is not done
// starting when it has exec'd (cgroups.Entry.Wait, for one that still has
// to enter its group).
func StartThen(cmd *exec.Cmd, entered func()) error {
	return Do(func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		if entered != nil {
			entered()
		}
		return nil
	})
}

// Run is cmd.Run with its start under the gate.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}
