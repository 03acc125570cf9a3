//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// DefaultReadPaths: see the Linux build.
var DefaultReadPaths = []string{"/usr", "/bin", "/lib", "/etc"}

// Main does nothing: there is no launcher off Linux.
func Main() {}

// Wrap fails: the sandbox is Linux's namespaces, Landlock and seccomp.
func Wrap(*exec.Cmd, string, Spec, []string) (func(), error) {
	return nil, errors.New("sandbox: only on Linux")
}

// LandlockABI is 0: Landlock is Linux's.
func LandlockABI() int { return 0 }
