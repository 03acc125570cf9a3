//go:build !linux

package cgroups

import (
	"os/exec"
	"syscall"
	"time"
)

// Cgroups exist only on Linux; Open always fails elsewhere.
type Base struct{}

// Group exists only on Linux.
type Group struct{}

// Open reports ErrUnavailable: this is not Linux.
func Open(Config) (*Base, error) { return nil, ErrUnavailable }

func (c *Base) Mode() Mode                               { return Auto }
func (c *Base) Controllers() []string                    { return nil }
func (c *Base) Path() string                             { return "" }
func (c *Base) Group(string, Limits) (*Group, error)     { return nil, ErrUnavailable }
func (c *Base) Children() ([]string, error)              { return nil, ErrUnavailable }
func (c *Base) Remove() error                            { return nil }
func (c *Base) Missing(Limits) []string                  { return nil }
func (g *Group) Child(string, Limits) (*Group, error)    { return nil, ErrUnavailable }
func (g *Group) Children() ([]string, error)             { return nil, ErrUnavailable }
func (g *Group) ChildGroup(string) *Group                { return g }
func (g *Group) Path() string                            { return "" }
func (g *Group) Limits() Limits                          { return Limits{} }
func (g *Group) MemoryLimit() int64                      { return 0 }
func (g *Group) MemoryUsage() int64                      { return 0 }
func (g *Group) Prepare(*exec.Cmd) (*Entry, error)       { return nil, ErrUnavailable }
func (g *Group) PrepareEntry(*exec.Cmd) (*Entry, error)  { return nil, ErrUnavailable }
func (g *Group) Procs() ([]int, error)                   { return nil, ErrUnavailable }
func (g *Group) Empty() bool                             { return true }
func (g *Group) Exists() bool                            { return false }
func (g *Group) OOMKills() uint64                        { return 0 }
func (g *Group) Signal(syscall.Signal) ([]int, error)    { return nil, ErrUnavailable }
func (g *Group) Kill() (int, error)                      { return 0, ErrUnavailable }
func (g *Group) KillAll(int, time.Duration) (int, error) { return 0, ErrUnavailable }
func (g *Group) Delete() error                           { return nil }
