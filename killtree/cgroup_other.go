//go:build !linux

package killtree

import (
	"os/exec"
	"syscall"
	"time"
)

// Cgroups exist only on Linux; OpenCgroups always fails elsewhere.
type Cgroups struct{}

// Group exists only on Linux.
type Group struct{}

// OpenCgroups reports ErrNoCgroups: this is not Linux.
func OpenCgroups(CgroupConfig) (*Cgroups, error) { return nil, ErrNoCgroups }

func (c *Cgroups) Mode() CgroupMode                      { return CgroupAuto }
func (c *Cgroups) Controllers() []string                 { return nil }
func (c *Cgroups) Path() string                          { return "" }
func (c *Cgroups) Group(string, Limits) (*Group, error)  { return nil, ErrNoCgroups }
func (c *Cgroups) Children() ([]string, error)           { return nil, ErrNoCgroups }
func (c *Cgroups) Remove() error                         { return nil }
func (c *Cgroups) Missing(Limits) []string               { return nil }
func (g *Group) Child(string, Limits) (*Group, error)    { return nil, ErrNoCgroups }
func (g *Group) Children() ([]string, error)             { return nil, ErrNoCgroups }
func (g *Group) ChildGroup(string) *Group                { return g }
func (g *Group) Path() string                            { return "" }
func (g *Group) Limits() Limits                          { return Limits{} }
func (g *Group) MemoryLimit() int64                      { return 0 }
func (g *Group) Prepare(*exec.Cmd) (func(), error)       { return nil, ErrNoCgroups }
func (g *Group) Procs() ([]int, error)                   { return nil, ErrNoCgroups }
func (g *Group) Empty() bool                             { return true }
func (g *Group) Exists() bool                            { return false }
func (g *Group) OOMKills() uint64                        { return 0 }
func (g *Group) Signal(syscall.Signal) ([]int, error)    { return nil, ErrNoCgroups }
func (g *Group) Kill() (int, error)                      { return 0, ErrNoCgroups }
func (g *Group) KillAll(int, time.Duration) (int, error) { return 0, ErrNoCgroups }
func (g *Group) Delete() error                           { return nil }
