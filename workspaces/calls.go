package workspaces

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wsbroker/wsbroker/opsapi"
)

// errShuttingDown refuses new commands and creates once Shutdown began.
var errShuttingDown = opsapi.E("broker", "", opsapi.ErrUnavailable, errors.New("the broker is shutting down"))

// Shutdown cancels every running command (exec calls and bash tool calls)
// and waits until they have returned, or ctx ends. New commands are
// refused from then on. It destroys no workspace, but removes the
// full-output files bash kept on the broker's host (a new broker process
// starts without them) and the logs of background processes.
func (s *Service) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.calls.cancelAll(errShuttingDown)
	if err := s.calls.wait(ctx); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, w := range s.workspaces {
		if err := w.toolbox.Close(); err != nil {
			s.logger.Warn("removing full-output files failed", "workspace", w.id, "err", err)
		}
		if err := w.procs.Close(ctx); err != nil {
			s.logger.Warn("removing background processes' logs failed", "workspace", w.id, "err", err)
		}
	}
	return nil
}

func (s *Service) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// startCommand registers a command in w unless the service is shutting
// down (ErrUnavailable): Delete and Shutdown cancel the returned context.
// The caller calls end when the command has returned.
func (s *Service) startCommand(ctx context.Context, w *Workspace) (cctx context.Context, end func(), err error) {
	if s.isStopping() {
		return nil, nil, errShuttingDown
	}
	cctx, done := s.calls.start(ctx, w.id)
	s.obs.CommandsRunning(1)
	return cctx, func() { s.obs.CommandsRunning(-1); done() }, nil
}

// callSet tracks the running commands so that Shutdown and Delete can
// cancel them and wait for them.
type callSet struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]call
	zero chan struct{} // closed when m becomes empty, for wait
}

type call struct {
	workspace string
	cancel    context.CancelCauseFunc
}

// start registers a command in workspace id and returns its context and
// the function that ends it.
func (c *callSet) start(parent context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[uint64]call{}
	}
	c.next++
	key := c.next
	c.m[key] = call{workspace: id, cancel: cancel}
	c.mu.Unlock()
	return ctx, func() {
		cancel(nil)
		c.mu.Lock()
		delete(c.m, key)
		if len(c.m) == 0 && c.zero != nil {
			close(c.zero)
			c.zero = nil
		}
		c.mu.Unlock()
	}
}

func (c *callSet) cancelAll(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		cl.cancel(cause)
	}
}

func (c *callSet) cancelWorkspace(id string, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		if cl.workspace == id {
			cl.cancel(cause)
		}
	}
}

// wait returns when no command is running, or with ctx's cause.
func (c *callSet) wait(ctx context.Context) error {
	c.mu.Lock()
	if len(c.m) == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	zero := c.zero
	c.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: waiting for running commands: %w", context.Cause(ctx))
	}
}
