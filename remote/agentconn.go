package remote

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
)

// agentConn is a workspace's connection to its agent.
type agentConn struct {
	sem      chan struct{} // held while an agent is started
	live     atomic.Pointer[agentclient.Client]
	started  atomic.Bool                  // an agent was ever connected
	failed   atomic.Pointer[agentFailure] // the last failed start
	none     atomic.Pointer[string]       // why the box had no agent at the last start
	restarts atomic.Int64
}

// agentFailure is the last failed start of a workspace's agent.
type agentFailure struct {
	until time.Time // calls fail as unavailable until then
	err   string
}

// current is the live connection, nil when there is none.
func (a *agentConn) current() *agentclient.Client {
	if c := a.live.Load(); c != nil && !c.IsClosed() {
		return c
	}
	return nil
}

// Agent is the workspace's live agent connection, started when there is
// none (the first call, or after the connection ended); concurrent
// callers share one start. An error wrapping ErrNoAgent sends the call to
// the Fallback; the box gone is ErrNotExist; a start that failed
// (including during the back-off after one) is ErrUnavailable.
func (w *Workspace) Agent(ctx context.Context) (*agentclient.Client, error) {
	const op = "agent"
	if w.cfg.NoAgent != "" {
		return nil, NoAgent(w.cfg.NoAgent)
	}
	a := &w.agent
	if c := a.current(); c != nil {
		return c, nil
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, opsapi.E(w.op(op), "", nil, ctx.Err())
	}
	defer func() { <-a.sem }()
	if c := a.current(); c != nil {
		return c, nil
	}
	if err := w.GoneErr(w.op(op), ""); err != nil {
		return nil, err
	}
	if f := a.failed.Load(); f != nil && time.Now().Before(f.until) {
		return nil, opsapi.E(w.op(op), "", opsapi.ErrUnavailable, fmt.Errorf("the workspace's agent could not be started (%s); next try at %s",
			f.err, f.until.UTC().Format(time.RFC3339)))
	}
	if a.live.Swap(nil) != nil { // one warning and one count per ended connection
		n := a.restarts.Add(1)
		w.logger.Warn("the workspace's agent ended (killed, or its connection lost); starting a fresh one", "restarts", n)
	}
	c, err := w.t.StartAgent(ctx)
	if err != nil {
		return nil, w.startFailed(ctx, err)
	}
	a.failed.Store(nil)
	a.none.Store(nil)
	a.started.Store(true)
	a.live.Store(c)
	return c, nil
}

// startFailed is the error of a start that failed with err.
func (w *Workspace) startFailed(ctx context.Context, err error) error {
	const op = "agent"
	a := &w.agent
	switch {
	case errors.Is(err, ErrNoAgent):
		why := err.Error()
		a.none.Store(&why)
		return err
	case ctx.Err() != nil:
		return opsapi.E(w.op(op), "", nil, ctx.Err())
	case errors.Is(err, opsapi.ErrNotExist):
		return err
	}
	if why := w.t.Vanished(ctx); why != "" {
		return w.Vanish(w.op(op), why)
	}
	retry := w.cfg.AgentRetry
	if retry > 0 {
		a.failed.Store(&agentFailure{until: time.Now().Add(retry), err: err.Error()})
	}
	w.logger.Error("the workspace's agent could not be started: the call fails as unavailable", "err", err, "retryIn", retry)
	return opsapi.E(w.op(op), "", opsapi.ErrUnavailable, fmt.Errorf("the workspace's agent could not be started: %w", err))
}

// report is what Transport says of the agent.
func (a *agentConn) report() opsapi.Transport {
	if a.current() != nil {
		return opsapi.Transport{Agent: true}
	}
	if f := a.failed.Load(); f != nil && time.Now().Before(f.until) {
		return opsapi.Transport{Agent: true, Detail: fmt.Sprintf("the agent could not be started (%s); calls fail as unavailable until %s",
			f.err, f.until.UTC().Format(time.RFC3339))}
	}
	if why := a.none.Load(); why != nil {
		return opsapi.Transport{Detail: *why}
	}
	if a.started.Load() {
		return opsapi.Transport{Agent: true, Detail: "the agent starts at the next call"}
	}
	return opsapi.Transport{Agent: true, Detail: "the agent starts at the first call"}
}

// AgentLive says whether the workspace has a live agent connection.
func (w *Workspace) AgentLive() bool { return w.agent.current() != nil }

// Restarts is how often the agent was started afresh after its
// connection ended.
func (w *Workspace) Restarts() int64 { return w.agent.restarts.Load() }

// TakeAgent moves from's live agent connection to w (a warm pool
// member's, to the workspace claiming it).
func (w *Workspace) TakeAgent(from *Workspace) {
	if c := from.agent.live.Swap(nil); c != nil {
		w.agent.started.Store(true)
		w.agent.live.Store(c)
	}
}

// CloseAgent ends the agent connection, if one is open (one the
// Transport shares, Config.SharedAgent, is only let go); the next call
// that needs the agent starts one.
func (w *Workspace) CloseAgent() {
	if c := w.agent.live.Swap(nil); c != nil && !w.cfg.SharedAgent {
		c.Close()
	}
}

// op is the operation name of name in errors: "docker.Open".
func (w *Workspace) op(name string) string { return w.cfg.Op + "." + name }

// agentErr is an error of reaching the agent for op on p: the workspace
// gone stays ErrNotExist, a call cut short keeps its context's kind,
// anything else is ErrUnavailable.
func agentErr(ctx context.Context, op, p string, err error) error {
	if errors.Is(err, opsapi.ErrNotExist) || ctx.Err() != nil {
		return opsapi.E(op, p, nil, err)
	}
	return opsapi.E(op, p, opsapi.ErrUnavailable, err)
}
