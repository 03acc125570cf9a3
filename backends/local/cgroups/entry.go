package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// maxEntryWait bounds Entry.Wait, so that a child that never gets to its
// entry (stopped by a debugger, say) holds up its caller only that long.
// A variable so that a test can take the bound away.
var maxEntryWait = 250 * time.Millisecond

// Entry is how a command gets into its group, made by Group.Prepare or
// Group.PrepareEntry: Release it once cmd.Start has returned, after Wait
// when the start succeeded.
type Entry struct {
	// entered is the read end of a pipe whose write end only the command
	// holds once started, until its entry shell has put it in the group
	// (v1 and PrepareEntry); nil when the command is born in the group
	// (v2's CLONE_INTO_CGROUP).
	entered *os.File
	// write is the caller's copy of that write end.
	write   *os.File
	release func()
}

// enteredPipe adds to cmd the pipe an entry shell closes, without writing
// to it (its reader may be gone), once it has written its pid to every
// cgroup.procs file, and returns its descriptor number in the child.
func (e *Entry) enteredPipe(cmd *exec.Cmd) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("cgroups: a pipe for the entry's end: %w", err)
	}
	e.entered, e.write = r, w
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	return strconv.Itoa(3 + len(cmd.ExtraFiles) - 1), nil
}

// Wait returns once the started command is in its group: at once when it
// was born there; otherwise when its entry shell has closed the pipe
// (or it died first), or after maxEntryWait.
//
// On v1 a command runs its entry shell in the caller's own cgroup, and a
// shell loading takes a millisecond or two of CPU there. A caller that
// starts commands one after another and waits for each (see package
// procstart) keeps that cost to one command at a time: 200 starting at
// once otherwise took the broker's CPU share for most of a second.
func (e *Entry) Wait() {
	if e.entered == nil {
		return
	}
	e.write.Close()
	e.write = nil
	_ = e.entered.SetReadDeadline(time.Now().Add(maxEntryWait))
	var buf [64]byte
	for {
		if _, err := e.entered.Read(buf[:]); err != nil {
			return
		}
	}
}

// Release closes what the entry opened.
func (e *Entry) Release() {
	for _, f := range []*os.File{e.entered, e.write} {
		if f != nil {
			f.Close()
		}
	}
	e.entered, e.write = nil, nil
	if e.release != nil {
		e.release()
	}
}
