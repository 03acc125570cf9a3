//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// DefaultReadPaths: see the Linux build.
var DefaultReadPaths = []string{"/usr", "/bin", "/lib", "/etc"}

// Spawner does not exist off Linux.
type Spawner struct{}

// NewSpawner fails: the sandbox is Linux's namespaces, Landlock and
// seccomp.
func NewSpawner(Spec) (*Spawner, error) { return nil, errors.New("sandbox: only on Linux") }

// Confinement is nothing.
func (*Spawner) Confinement() Confinement { return Confinement{} }

// Start fails.
func (*Spawner) Start(*exec.Cmd, func()) error { return errors.New("sandbox: only on Linux") }

// Close does nothing.
func (*Spawner) Close() {}

// LandlockABI is 0: Landlock is Linux's.
func LandlockABI() int { return 0 }
