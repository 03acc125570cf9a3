//go:build unix

package killtree

import (
	"errors"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Prepare makes cmd start in a new process group whose id is the child's
// pid, so that KillGroup(cmd.Process.Pid, ...) reaches every descendant
// that stays in the group. Call it before cmd.Start.
func Prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

// KillGroup ends process group pgid: SIGTERM to the group, up to grace for
// it to vanish, then SIGKILL. It returns the number of processes the group
// had when the kill began (on systems without /proc: 1 if the group
// existed, else 0). A group that is already gone is not an error.
func KillGroup(pgid int, grace time.Duration) (killed int, err error) {
	return KillAll(pgid, "", grace)
}

// KillAll ends process group pgid (when pgid > 0) and every process whose
// environment holds the exact entry marker (when marker != "", Linux
// only), under one grace period: SIGTERM to both, wait up to grace for
// both to vanish, then SIGKILL. killed counts the distinct processes found
// when the kill began.
func KillAll(pgid int, marker string, grace time.Duration) (killed int, err error) {
	if pgid <= 0 && marker == "" {
		return 0, nil
	}
	if pgid == 1 || pgid == syscall.Getpgrp() {
		// -1 would signal every process we may signal; our own group
		// would kill the caller.
		return 0, errors.New("killtree: refusing to kill process group " + strconv.Itoa(pgid))
	}
	var errs []error
	seen := map[int]bool{}
	if pgid > 0 {
		n, gerr := groupCount(pgid)
		if gerr == nil {
			killed += n
			pids, _ := GroupPids(pgid)
			for _, p := range pids {
				seen[p] = true
			}
		}
		if err := SignalGroup(pgid, syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
	}
	var marked *markedSet
	if marker != "" {
		var merr error
		marked, merr = newMarkedSet(marker)
		if merr != nil {
			errs = append(errs, merr)
		} else {
			for _, p := range marked.signal(syscall.SIGTERM) {
				if !seen[p] {
					seen[p] = true
					killed++
				}
			}
		}
	}

	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		groupGone := pgid <= 0 || GroupEmpty(pgid)
		markedGone := marked == nil || marked.empty()
		if groupGone && markedGone {
			break
		}
		time.Sleep(pollInterval)
	}

	if pgid > 0 {
		if err := SignalGroup(pgid, syscall.SIGKILL); err != nil {
			errs = append(errs, err)
		}
	}
	if marked != nil {
		for _, p := range marked.killUntilGone() {
			if !seen[p] {
				seen[p] = true
				killed++
			}
		}
	}
	return killed, errors.Join(errs...)
}

// SignalGroup sends sig to every process of group pgid; a group that is
// already gone (ESRCH) counts as success.
func SignalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return &signalError{pgid: pgid, sig: sig, err: err}
}

type signalError struct {
	pgid int
	sig  syscall.Signal
	err  error
}

func (e *signalError) Error() string {
	return "killtree: " + e.sig.String() + " to process group " + strconv.Itoa(e.pgid) + ": " + e.err.Error()
}

func (e *signalError) Unwrap() error { return e.err }

// GroupGone reports whether process group pgid has no member at all,
// zombies included, with one signal 0 to the group (GroupMembers reads
// every process's stat). False may mean only zombies are left:
// GroupMembers tells.
func GroupGone(pgid int) bool { return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) }

// GroupEmpty reports whether group pgid has no live (non-zombie) member.
// Where members cannot be counted it asks the kernel with signal 0, which
// also sees zombies: the caller must reap its own child.
func GroupEmpty(pgid int) bool {
	if n, err := groupCount(pgid); err == nil {
		return n == 0
	}
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// groupCount is GroupMembers, or the kernel's signal-0 answer (0 or 1)
// where /proc is missing.
func groupCount(pgid int) (int, error) {
	n, err := GroupMembers(pgid)
	if errors.Is(err, errors.ErrUnsupported) {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return 0, nil
		}
		return 1, nil
	}
	return n, err
}
