//go:build !linux

package killtree

import (
	"errors"
	"time"
)

// BecomeSubreaper needs Linux's PR_SET_CHILD_SUBREAPER.
func BecomeSubreaper() error { return errors.ErrUnsupported }

// Descendants needs Linux's /proc.
func Descendants() ([]int, error) { return nil, errors.ErrUnsupported }

// DescendantsOf needs Linux's /proc.
func DescendantsOf(pid int) ([]int, error) { return nil, errors.ErrUnsupported }

// KillSubtree needs Linux.
func KillSubtree(grace time.Duration, reap func()) (int, error) { return 0, errors.ErrUnsupported }
