//go:build unix && !linux

package killtree

import (
	"errors"
	"syscall"
	"time"
)

// GroupMembers needs /proc; this system has none.
func GroupMembers(pgid int) (int, error) { return 0, errors.ErrUnsupported }

// KillMarked needs /proc; this system has none.
func KillMarked(marker string, grace time.Duration) (int, error) {
	return 0, errors.ErrUnsupported
}

// GroupMarked needs /proc; this system has none.
func GroupMarked(pgid int, marker string) (bool, error) { return false, errors.ErrUnsupported }

// GroupPids needs /proc; this system has none.
func GroupPids(pgid int) ([]int, error) { return nil, errors.ErrUnsupported }

// Alive reports whether process pid exists; without /proc a zombie
// counts as alive.
func Alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// markedSet is never built where /proc is missing.
type markedSet struct{}

func newMarkedSet(string) (*markedSet, error)  { return nil, errors.ErrUnsupported }
func (*markedSet) signal(syscall.Signal) []int { return nil }
func (*markedSet) empty() bool                 { return true }
func (*markedSet) killUntilGone() []int        { return nil }

// MarkedPids needs /proc; this system has none.
func MarkedPids(marker string) ([]int, error) { return nil, errors.ErrUnsupported }

// Cmdline needs /proc; this system has none.
func Cmdline(pid int) string { return "" }

// CPUTime needs /proc: without it nothing is measured.
func CPUTime(pids []int) time.Duration { return 0 }
