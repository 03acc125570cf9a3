package docker

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// AgentRunDir is where a workspace's run directory appears inside its
// container, read-only. The agent is the injected binary
// (InjectedSFTPServer).
const AgentRunDir = "/.wsbroker/run"

// agentStartTimeout bounds starting an agent and its connecting back.
const agentStartTimeout = 15 * time.Second

// agentRetry is how long a workspace whose agent could not be started
// answers ErrUnavailable before it tries again.
const agentRetry = 5 * time.Second

// agentSetup is what every workspace's agent shares: whether there is
// one, and the host directory of run directories.
type agentSetup struct {
	on     bool
	why    string // why not, when off
	runDir string
}

// setupAgent decides whether new workspaces get an agent, logging why
// not.
func (b *Backend) setupAgent() {
	c := b.cfg
	if c.Agent == AgentOff {
		b.agent.why = "agent: off in the configuration"
		return
	}
	if b.injectBinary == "" {
		b.agent.why = "no agent binary is injected"
		b.logger.Info("no agent: no binary is injected; commands and files go through the engine's exec")
		return
	}
	run := c.RunDir
	if run == "" {
		sum := sha256.Sum256([]byte(c.Identity))
		run = filepath.Join(os.TempDir(), "wsbroker-run-"+hex.EncodeToString(sum[:6]))
	}
	if err := os.MkdirAll(run, 0o700); err != nil {
		b.agent.why = "the agents' run directory cannot be made"
		b.logger.Warn("no agent: its run directory cannot be made", "dir", run, "err", err)
		return
	}
	b.agent = agentSetup{on: true, runDir: run}
	b.logger.Info("workspaces get the in-box agent", "runDir", run)
}

// agentDirOf is workspace id's run directory on the host, named by a
// hash of the id: a socket's path must fit in 108 bytes, and ids may be
// 128 long.
func (b *Backend) agentDirOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(b.agent.runDir, hex.EncodeToString(sum[:8]))
}

// agentRunDir makes workspace id's run directory, or returns "" (no
// agent for it) when it cannot. It is the broker's, not the container
// user's, and the container sees it read-only: the agent's socket is
// the broker's listening one, so nothing in the workspace can write
// there, fill the host's disk through it or make it unusable.
func (b *Backend) agentRunDir(id string) string {
	if !b.agent.on {
		return ""
	}
	dir := b.agentDirOf(id)
	_ = os.RemoveAll(dir) // a leftover of an earlier workspace of that name
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.logger.Warn("no agent for this workspace: its run directory cannot be made", "workspace", id, "dir", dir, "err", err)
		return ""
	}
	return dir
}

// freshRunDir readies a workspace's run directory for an agent's start:
// the broker's, open to nobody else for writing, and empty. A workspace
// created before the directory was the broker's (owned by the container
// user, writable in the container) gets it back the same way; the
// directory itself is kept, as the container's mount holds it.
func freshRunDir(dir string) error {
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

// agentClient is the workspace's live agent connection: nil for a
// workspace without an agent (its calls use the engine's exec), else
// the connection, started at the first call that needs it and started
// afresh when the last one ended (the agent killed, its connection
// lost). A workspace with an agent never falls back to the engine's
// exec, whose commands a kill cannot reach whole: when its agent cannot
// be started the call fails with ErrUnavailable, logged, and the next
// start is tried after agentRetry. Concurrent callers share one start.
func (w *Workspace) agentClient(ctx context.Context, op string) (*agentclient.Client, error) {
	if w.agentDir == "" {
		return nil, nil
	}
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return c, nil
	}
	select {
	case w.agentSem <- struct{}{}:
	case <-ctx.Done():
		return nil, opsapi.E(op, "", nil, ctx.Err())
	}
	defer func() { <-w.agentSem }()
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return c, nil
	}
	if err := w.gone(op, ""); err != nil {
		return nil, err
	}
	if f := w.agentFailed.Load(); f != nil && time.Now().Before(f.until) {
		return nil, opsapi.E(op, "", opsapi.ErrUnavailable, fmt.Errorf("the workspace's agent could not be started (%s); next try at %s",
			f.err, f.until.UTC().Format(time.RFC3339)))
	}
	if w.agentLive.Load() != nil {
		n := w.agentRestarts.Add(1)
		w.logger.Warn("the workspace's agent ended (killed, or its connection lost); starting a fresh one", "restarts", n)
	}
	c, err := w.startAgent(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, opsapi.E(op, "", nil, ctx.Err())
		}
		w.agentFailed.Store(&agentFailure{until: time.Now().Add(agentRetry), err: err.Error()})
		w.logger.Error("the workspace's agent could not be started: its calls fail as unavailable, never through the engine's exec",
			"err", err, "retryIn", agentRetry)
		return nil, opsapi.E(op, "", opsapi.ErrUnavailable, fmt.Errorf("the workspace's agent could not be started: %w", err))
	}
	w.agentFailed.Store(nil)
	w.agentLive.Store(c)
	return c, nil
}

// startAgent starts an agent in one exec with fresh keys on its stdin
// and takes its connection to a socket the broker listens on in the
// workspace's run directory, for this start only.
func (w *Workspace) startAgent(ctx context.Context) (*agentclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	agentSide, brokerSide, err := agent.NewCredsPair()
	if err != nil {
		return nil, err
	}
	keys, err := json.Marshal(agentSide)
	if err != nil {
		return nil, err
	}
	if err := freshRunDir(w.agentDir); err != nil {
		return nil, fmt.Errorf("the agent's run directory: %w", err)
	}
	sock := "a-" + randomID()[:12] + ".sock"
	ln, err := net.Listen("unix", filepath.Join(w.agentDir, sock))
	if err != nil {
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	// The container's user connects (the directory is read-only to it);
	// Accept closes the listener, which removes the socket.
	if err := os.Chmod(filepath.Join(w.agentDir, sock), 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	stderr := &execpump.Head{Max: 4096}
	p, err := w.startExec(ctx, execOpts{argv: []string{InjectedSFTPServer, "serve", "--connect", AgentRunDir + "/" + sock},
		stdin: true, stderr: stderr})
	if err != nil {
		ln.Close()
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
	if _, err := p.conn.Write(append(keys, '\n')); err != nil {
		ln.Close()
		return nil, fmt.Errorf("sending the agent its keys: %w", err)
	}
	c, err := agentclient.Accept(actx, ln, brokerSide)
	if err != nil {
		return nil, fmt.Errorf("the agent did not connect: %w", err)
	}
	select { // its attach ends with the exec's: let it say ready first
	case <-said:
	case <-ctx.Done():
	}
	w.logger.Debug("agent started", "socket", sock)
	return c, nil
}

// agentFailure is the last failed start of a workspace's agent.
type agentFailure struct {
	until time.Time // calls fail as unavailable until then
	err   string
}

// Transport says whether the workspace's calls go through its agent
// (opsapi.TransportReporter).
func (w *Workspace) Transport() opsapi.Transport {
	if w.agentDir == "" {
		why := w.b.agent.why
		if why == "" {
			why = "the workspace has no agent run directory"
		}
		return opsapi.Transport{Detail: why}
	}
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return opsapi.Transport{Agent: true}
	}
	if f := w.agentFailed.Load(); f != nil && time.Now().Before(f.until) {
		return opsapi.Transport{Agent: true, Detail: fmt.Sprintf("the agent could not be started (%s); calls fail as unavailable until %s",
			f.err, f.until.UTC().Format(time.RFC3339))}
	}
	return opsapi.Transport{Agent: true, Detail: "the agent starts at the first call"}
}

// closeAgent ends the agent connection, if one is open.
func (w *Workspace) closeAgent() {
	if c := w.agentLive.Swap(nil); c != nil {
		c.Close()
	}
}
