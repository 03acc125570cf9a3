//go:build !linux

package sftpserver

import "os"

// WidenPipes does nothing here: only Linux lets a pipe's size be set.
func WidenPipes(files ...*os.File) {}

// readSmall never inlines here: ReadSmall requests are answered as plain
// STATs.
func readSmall(uint32, string) ([]byte, bool) { return nil, false }

// replace renames tmp over target: the swap the Linux build does is
// Linux's alone.
func replace(tmp, target string, _, _ bool) error { return os.Rename(tmp, target) }
