package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pkg/sftp"
)

// stdio joins the process's standard input and output.
type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdio) Close() error                { return errors.Join(os.Stdin.Close(), os.Stdout.Close()) }

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: wsb-sftp-server (serves SFTP on stdin/stdout; no arguments)")
		os.Exit(2)
	}
	srv, err := sftp.NewServer(stdio{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "wsb-sftp-server:", err)
		os.Exit(1)
	}
	// The client closing its end is the normal way to finish.
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "wsb-sftp-server:", err)
		os.Exit(1)
	}
}
