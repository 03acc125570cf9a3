//go:build !linux

package loopfs

import (
	"context"
	"errors"
)

// MinSize is the smallest filesystem Make makes.
const MinSize = 8 << 20

var errLinuxOnly = errors.New("loop filesystems are Linux-only")

func Make(context.Context, string, string, int64, int, int) error { return errLinuxOnly }
func Mount(context.Context, string, string) error                 { return errLinuxOnly }
func Bind(string, string) error                                   { return errLinuxOnly }
func Unmount(context.Context, string) error                       { return nil }
func Remove(context.Context, string, string) error                { return nil }
func Mounted(string) (bool, error)                                { return false, nil }
func Usage(string) (int64, int64, error)                          { return 0, 0, errLinuxOnly }
func Probe(string) error                                          { return errLinuxOnly }
