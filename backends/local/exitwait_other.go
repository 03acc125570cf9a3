//go:build !linux

package local

import "os/exec"

// exitWaiter is Linux-only (pidfds); elsewhere cmd.Wait waits alone.
type exitWaiter struct{}

func prepareExitWait(*exec.Cmd) *exitWaiter { return &exitWaiter{} }

func (*exitWaiter) wait()  {}
func (*exitWaiter) close() {}
