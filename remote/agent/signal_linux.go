//go:build linux

package agent

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsbroker/wsbroker/killtree"
)

// maxSignalScans bounds signalSubtree's scans of a tree that keeps
// forking.
const maxSignalScans = 4

// signalSubtree sends sig, once, to every process below the reaper: one
// that left the command's group or cleared its environment is there too,
// as for the kill. Each process is pinned with a pidfd and then found
// again by a later scan of the descendants before it is signalled, so a
// pid freed (reaped by its parent below) and reused outside the subtree
// in between is never hit. Scans repeat while they find processes not
// yet pinned (a child forked meanwhile), up to maxSignalScans; a process
// that is gone is skipped.
func signalSubtree(sig syscall.Signal) {
	pins := pidPins{}
	defer pins.release()
	var confirmed []int
	for range maxSignalScans {
		pids, err := killtree.Descendants()
		if err != nil {
			fmt.Fprintln(os.Stderr, "wsb-agent reap: signal:", err)
			return
		}
		// Those pinned before this scan and in it are confirmed; the
		// fresh ones wait for the next scan.
		confirmed = confirmed[:0]
		var fresh int
		for _, pid := range pids {
			if _, ok := pins[pid]; ok {
				confirmed = append(confirmed, pid)
			} else if pins.pin(pid) {
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	for _, pid := range confirmed {
		pins.signal(pid, sig)
	}
}

// pidPins holds a pidfd per pid, -1 where pidfds are refused (an
// engine's seccomp profile may not know pidfd_open): there the scan and a
// plain kill follow each other, as in killtree.
type pidPins map[int]int

// pin opens pid's pidfd; false when the process is gone.
func (p pidPins) pin(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		p[pid] = fd
	case errors.Is(err, syscall.ESRCH):
		return false
	default:
		p[pid] = -1
	}
	return true
}

func (p pidPins) signal(pid int, sig syscall.Signal) {
	if fd := p[pid]; fd >= 0 {
		_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		return
	}
	_ = syscall.Kill(pid, sig)
}

func (p pidPins) release() {
	for _, fd := range p {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
