package remoteexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// KillHelper is the broker's end of a KillHelperScript already running on
// the remote side (`bash -c KillHelperScript` on a stream of its own): a
// kill that needs no new process there. A transport hands it the
// builtin-only kill its RunFunc is given (NoForkKillArgs).
type KillHelper struct {
	mu  sync.Mutex
	rw  io.ReadWriteCloser
	out *bufio.Reader
}

// StartKillHelper waits for the script's ready line on rw, its stdin and
// stdout. When ctx ends first, or the line is not the script's, rw is
// closed and the error returned.
func StartKillHelper(ctx context.Context, rw io.ReadWriteCloser) (*KillHelper, error) {
	k := &KillHelper{rw: rw, out: bufio.NewReader(rw)}
	ready := make(chan error, 1)
	go func() {
		line, err := k.out.ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "@wsbroker ready" {
			err = fmt.Errorf("unexpected first line %q", line)
		}
		ready <- err
	}()
	var err error
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		rw.Close()
		return nil, fmt.Errorf("the kill helper did not start: %w", err)
	}
	return k, nil
}

// Kill asks the helper for one kill (the MODE, PGID and MARKER of
// NoForkKillArgs) and returns its answer line, "@wsbroker killed N". A
// kill cut short by ctx closes the helper's stream: it answers no more.
func (k *KillHelper) Kill(ctx context.Context, mode, pgid, marker string) ([]byte, error) {
	if strings.ContainsAny(mode+pgid+marker, " \t\n") {
		return nil, errors.New("kill arguments with blanks")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { k.rw.Close() })
	defer stop()
	if _, err := fmt.Fprintf(k.rw, "%s %s %s\n", mode, pgid, marker); err != nil {
		return nil, err
	}
	for {
		line, err := k.out.ReadString('\n')
		if strings.HasPrefix(line, "@wsbroker killed ") {
			return []byte(line), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Close ends the helper's stream.
func (k *KillHelper) Close() error { return k.rw.Close() }
