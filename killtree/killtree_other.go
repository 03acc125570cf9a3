//go:build !unix

package killtree

import (
	"errors"
	"os/exec"
	"time"
)

// Prepare does nothing where there are no Unix process groups.
func Prepare(cmd *exec.Cmd) {}

// KillGroup is not supported without Unix process groups.
func KillGroup(pgid int, grace time.Duration) (int, error) { return 0, errors.ErrUnsupported }

// KillAll is not supported without Unix process groups.
func KillAll(pgid int, marker string, grace time.Duration) (int, error) {
	return 0, errors.ErrUnsupported
}

// GroupGone cannot tell without Unix process groups: false.
func GroupGone(pgid int) bool { return false }

// GroupEmpty cannot tell without Unix process groups: false.
func GroupEmpty(pgid int) bool { return false }

// GroupPids is not supported without Unix process groups.
func GroupPids(pgid int) ([]int, error) { return nil, errors.ErrUnsupported }

// Alive is not supported without /proc: false.
func Alive(pid int) bool { return false }

// GroupMembers is not supported without Unix process groups.
func GroupMembers(pgid int) (int, error) { return 0, errors.ErrUnsupported }

// GroupMarked is not supported without /proc.
func GroupMarked(pgid int, marker string) (bool, error) { return false, errors.ErrUnsupported }

// KillMarked is not supported without /proc.
func KillMarked(marker string, grace time.Duration) (int, error) {
	return 0, errors.ErrUnsupported
}

// MarkedPids is not supported without /proc.
func MarkedPids(marker string) ([]int, error) { return nil, errors.ErrUnsupported }

// Cmdline is not supported without /proc.
func Cmdline(pid int) string { return "" }

// CPUTime measures nothing here.
func CPUTime(pids []int) time.Duration { return 0 }
