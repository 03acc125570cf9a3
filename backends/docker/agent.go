package docker

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/agent"
	"github.com/wsbroker/wsbroker/agent/agentclient"
	"github.com/wsbroker/wsbroker/backends/shared/execpump"
	"github.com/wsbroker/wsbroker/opsapi"
)

// AgentRunDir is where a workspace's run directory appears inside its
// container. The agent is the injected binary (InjectedSFTPServer).
const AgentRunDir = "/.wsbroker/run"

// agentStartTimeout bounds starting an agent and connecting to it.
const agentStartTimeout = 15 * time.Second

// agentRetry is how long a workspace whose agent could not be started
// uses the engine's exec before it tries again.
const agentRetry = time.Minute

// agentSetup is what every workspace's agent shares: whether there is
// one, the host directory of run directories, and the container user's
// ids, which own each run directory so the agent can make its socket
// there.
type agentSetup struct {
	on       bool
	why      string // why not, when off
	runDir   string
	uid, gid int
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
	uid, gid, ok := numericUser(c.User)
	if !ok {
		b.agent.why = "the agent's run directory needs a numeric user (uid:gid) to own it"
		b.logger.Info("no agent: its run directory needs a numeric user (uid:gid) to own it", "user", c.User)
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
	b.agent = agentSetup{on: true, runDir: run, uid: uid, gid: gid}
	b.logger.Info("workspaces get the in-box agent", "runDir", run)
}

func numericUser(user string) (uid, gid int, ok bool) {
	u, g, _ := strings.Cut(user, ":")
	if g == "" {
		g = u
	}
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	return uid, gid, err1 == nil && err2 == nil
}

// agentDirOf is workspace id's run directory on the host, named by a
// hash of the id: a socket's path must fit in 108 bytes, and ids may be
// 128 long.
func (b *Backend) agentDirOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(b.agent.runDir, hex.EncodeToString(sum[:8]))
}

// agentRunDir makes workspace id's run directory, owned by the container's
// user and open to nobody else, or returns "" (no agent for it) when it
// cannot.
func (b *Backend) agentRunDir(id string) string {
	if !b.agent.on {
		return ""
	}
	dir := b.agentDirOf(id)
	_ = os.RemoveAll(dir) // a leftover of an earlier workspace of that name
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		err = os.Chown(dir, b.agent.uid, b.agent.gid)
	}
	if err != nil {
		b.logger.Warn("no agent for this workspace: its run directory cannot be given to the container's user",
			"workspace", id, "dir", dir, "err", err)
		_ = os.RemoveAll(dir)
		return ""
	}
	return dir
}

// agentClient is the workspace's live agent connection, started at the
// first call that needs it; nil when the workspace has none (the caller
// then uses the engine's exec). Concurrent callers share one start.
func (w *Workspace) agentClient(ctx context.Context) *agentclient.Client {
	if w.agentDir == "" {
		return nil
	}
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return c
	}
	select {
	case w.agentSem <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	defer func() { <-w.agentSem }()
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return c
	}
	if time.Now().Before(w.agentRetryAt) || w.gone("", "") != nil {
		return nil
	}
	c, err := w.startAgent(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.agentRetryAt = time.Now().Add(agentRetry)
			w.agentFailed.Store(&agentFailure{until: w.agentRetryAt, err: err.Error()})
			w.logger.Warn("the agent could not be started; using the engine's exec for a while", "err", err)
		}
		return nil
	}
	w.agentLive.Store(c)
	return c
}

// startAgent starts an agent in one exec with fresh keys on its stdin,
// waits for its "ready" and connects to its socket.
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
	sock := "a-" + randomID()[:12] + ".sock"
	stderr := &execpump.Head{Max: 4096}
	p, err := w.startExec(ctx, execOpts{argv: []string{InjectedSFTPServer, "serve", "--socket", AgentRunDir + "/" + sock},
		stdin: true, stderr: stderr})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	if _, err := p.conn.Write(append(keys, '\n')); err != nil {
		return nil, fmt.Errorf("sending the agent its keys: %w", err)
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		if err == nil {
			err = errors.New("unexpected output")
		}
		return nil, fmt.Errorf("the agent did not start (%w): %q %s", err, line, strings.TrimSpace(stderr.String()))
	}
	c, err := agentclient.DialUnix(ctx, filepath.Join(w.agentDir, sock), brokerSide)
	if err != nil {
		return nil, fmt.Errorf("connecting to the agent: %w", err)
	}
	w.logger.Debug("agent started", "socket", sock)
	return c, nil
}

// agentFailure is the last failed start of a workspace's agent.
type agentFailure struct {
	until time.Time // the engine's exec is used until then
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
		return opsapi.Transport{Detail: fmt.Sprintf("the agent could not be started (%s); the engine's exec until %s",
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
