package agentsock

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// StartTimeout bounds starting an agent and its connecting back.
const StartTimeout = 15 * time.Second

// Process is the command the agent runs as: its stdout and its stdin.
type Process interface {
	Stdout() io.Reader
	Stdin() io.WriteCloser
	Close() error
}

// StartFunc starts argv in the box with its stdin attached and its stderr
// written to stderr (which never blocks).
type StartFunc func(ctx context.Context, argv []string, stderr io.Writer) (Process, error)

// Dir is the directory the broker shares with the box, as each sees it.
type Dir struct {
	Host string // on the broker's host
	Box  string // inside the box, read-only there
}

// Start starts the agent at binary (its path in the box) through start,
// with fresh keys on its stdin, and returns its connection to a socket
// the broker listens on in dir, for this start only.
func Start(ctx context.Context, dir Dir, binary string, start StartFunc) (*agentclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	agentSide, brokerSide, err := agent.NewCredsPair()
	if err != nil {
		return nil, err
	}
	keys, err := json.Marshal(agentSide)
	if err != nil {
		return nil, err
	}
	sock := "a-" + rand.Text()[:12] + ".sock"
	ln, err := listen(dir.Host, sock)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	stderr := &execpump.Head{Max: 4096}
	p, err := start(ctx, []string{binary, "serve", "--connect", dir.Box + "/" + sock}, stderr)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	// The agent says "ready" once connected; anything else (its exit)
	// ends the wait at once, with what it said.
	actx, failed := context.WithCancelCause(ctx)
	defer failed(nil)
	said := make(chan struct{})
	go func() {
		defer close(said)
		line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			if err == nil {
				err = errors.New("unexpected output")
			}
			failed(fmt.Errorf("the agent did not start (%w): %q %s", err, line, strings.TrimSpace(stderr.String())))
		}
	}()
	if _, err := p.Stdin().Write(append(keys, '\n')); err != nil {
		// A command that ended before reading its keys (no agent there,
		// or one that failed at once) closed its stdin: what it said is
		// the reason, not the broken pipe.
		select {
		case <-said:
		case <-ctx.Done():
		}
		if why := context.Cause(actx); why != nil && ctx.Err() == nil {
			return nil, why
		}
		return nil, fmt.Errorf("sending the agent its keys: %w", err)
	}
	c, err := agentclient.Accept(actx, ln, brokerSide)
	if err != nil {
		return nil, fmt.Errorf("the agent did not connect: %w", err)
	}
	select { // its command ends with its stdio: let it say ready first
	case <-said:
	case <-ctx.Done():
	}
	return c, nil
}

// listen readies dir and listens on the socket sock in it, which anyone
// may connect to (the box's user does; the directory is read-only to
// it). Accept, or Close, closes the listener, which removes the socket.
func listen(dir, sock string) (net.Listener, error) {
	if err := fresh(dir); err != nil {
		return nil, fmt.Errorf("the agent's run directory: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, sock))
	if err != nil {
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	if err := os.Chmod(filepath.Join(dir, sock), 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	return ln, nil
}

// fresh readies the run directory for an agent's start: the broker's,
// open to nobody else for writing, and empty. A directory made before it
// was the broker's (owned by the box's user, writable in the box) is
// taken back the same way; the directory itself is kept, as the box's
// mount holds it.
func fresh(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
		if err := os.Lchown(dir, os.Geteuid(), os.Getegid()); err != nil {
			return err
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
