package main

import (
	"fmt"
	"os"

	"github.com/wsbroker/wsbroker/backends/shared/sftpserver"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: wsb-sftp-server (serves SFTP on stdin/stdout; no arguments)")
		os.Exit(2)
	}
	sftpserver.WidenPipes(os.Stdin, os.Stdout)
	// The client closing its end is the normal way to finish.
	if err := sftpserver.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wsb-sftp-server:", err)
		os.Exit(1)
	}
}
