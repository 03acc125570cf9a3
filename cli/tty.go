package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/wsbroker/wsbroker/opsapi"
)

// stdinIsTerminal reports whether the CLI's stdin is a terminal.
func (c *CLI) stdinIsTerminal() bool {
	in, ok := c.Stdin.(*os.File)
	return ok && term.IsTerminal(int(in.Fd()))
}

// terminal makes req run on a remote terminal fed from the CLI's stdin,
// which must be a terminal: it goes raw (keys, Ctrl-C included, go to the
// remote one as typed) and the remote size follows the local one
// (SIGWINCH); restore undoes that.
func (c *CLI) terminal(ctx context.Context, req *opsapi.ExecRequest) (restore func(), err error) {
	req.TTY = &opsapi.TTYSize{Rows: 24, Cols: 80}
	// The remote programs draw for this terminal (the backends' own
	// TERM is dumb); a request's env wins over theirs.
	if t := c.Getenv("TERM"); t != "" {
		req.Env = append([]string{"TERM=" + t}, req.Env...)
	}
	in, ok := c.Stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil, errors.New("exec -t needs a terminal on stdin")
	}
	req.Stdin = in
	size := func() (opsapi.TTYSize, bool) {
		cols, rows, err := term.GetSize(int(in.Fd()))
		return opsapi.TTYSize{Rows: uint16(rows), Cols: uint16(cols)}, err == nil && rows > 0 && cols > 0
	}
	if s, ok := size(); ok {
		req.TTY = &s
	}
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return nil, fmt.Errorf("making the terminal raw: %w", err)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	resize := make(chan opsapi.TTYSize, 1)
	req.Resize = resize
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				if s, ok := size(); ok {
					select {
					case resize <- s:
					default:
					}
				}
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		_ = term.Restore(int(in.Fd()), old)
	}, nil
}
