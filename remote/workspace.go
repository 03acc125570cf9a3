package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Transport is how a Workspace reaches its box: what a backend gives it.
type Transport interface {
	// StartAgent starts the box's agent (or reaches one already running
	// there) and returns a connection to it. The Workspace calls it at
	// the first call that needs the agent and again when the connection
	// ended, one call at a time. An error wrapping ErrNoAgent says the
	// box has no agent now: that call takes the Fallback.
	StartAgent(ctx context.Context) (*agentclient.Client, error)
	// Vanished is asked after the agent could not be started: why the
	// box is no longer there, "" while it is (or when that cannot be
	// told).
	Vanished(ctx context.Context) string
	// Destroy removes the box and everything running in it. It is
	// called once, and again only after it failed.
	Destroy(ctx context.Context) error
}

// Fallback serves a workspace's calls without the agent: a box that has
// none (Config.NoAgent, or ErrNoAgent from StartAgent), or its files when
// Config.SFTPAlways is set.
type Fallback interface {
	// SFTP is the box's SFTP client (an sftpops.ClientFunc): the live
	// one, or a new one when there is none or broken is it.
	SFTP(ctx context.Context, broken *sftp.Client) (*sftp.Client, error)
	// Identity is the account the SFTP server runs as.
	Identity(ctx context.Context) (sftpops.Identity, error)
	// Exec runs a checked request in the absolute directory cwd (see
	// remoteexec.Runner.Exec).
	Exec(ctx context.Context, req opsapi.ExecRequest, cwd string) (opsapi.ExecResult, error)
	// StartSearch starts argv in the workspace root for rgjson.Remote.
	StartSearch(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error)
}

// ErrNoAgent is what StartAgent wraps when the box has no agent now.
var ErrNoAgent = errors.New("no agent")

// NoAgent is an error wrapping ErrNoAgent that says why.
func NoAgent(why string) error { return fmt.Errorf("%w: %s", ErrNoAgent, why) }

// Config describes one workspace.
type Config struct {
	// Op prefixes the operation names in errors: "docker" gives
	// "docker.Open".
	Op string
	// ID is the workspace's name; Root its directory in the box.
	ID, Root string
	// Where ends the error for a missing ripgrep: "in the pod".
	Where string
	// Logger receives the workspace's events; nil discards them.
	Logger *slog.Logger
	// Exec are the shell, the kill grace, the draining and ripgrep.
	Exec execconf.Exec
	// NoSync skips the fsync of a written file (sftpops.Options.NoSync).
	NoSync bool
	// NoAgent, when set, says why the workspace has no agent: every
	// call takes the Fallback and Transport reports the reason.
	NoAgent string
	// AgentRetry is how long calls answer ErrUnavailable after the
	// agent could not be started, before the next start; 0 tries again
	// at the next call.
	AgentRetry time.Duration
	// Fallback serves calls without the agent; nil for none (such a
	// call is then ErrUnavailable).
	Fallback Fallback
	// SFTPAlways sends files through the Fallback's SFTP even while an
	// agent runs (ssh: the connection's own SFTP subsystem).
	SFTPAlways bool
	// SharedAgent says the agent connection StartAgent returns belongs
	// to the Transport and serves other workspaces too (ssh: one per host
	// connection): the workspace never closes it.
	SharedAgent bool
	// Env is added to every command's environment before the request's
	// own; SearchEnv to ripgrep's. Both through the agent only (the
	// Fallback adds its own).
	Env, SearchEnv []string
	// ReservedEnv are variables a request may not set (besides
	// remoteexec's own).
	ReservedEnv []string
	// HostCwd skips the /proc refusal and the check of the working
	// directory: the account, not a container, is the boundary.
	HostCwd bool
	// MemoryLimit, when set, turns on the OOM report: a command during
	// which the box's OOM kill count rose is OOMKilled, with this limit.
	MemoryLimit func(ctx context.Context) int64
}

// Workspace is one box reached through a Transport: files, commands and
// searches over its agent or the Fallback.
type Workspace struct {
	cfg    Config
	t      Transport
	logger *slog.Logger
	agent  agentConn
	fs     atomic.Pointer[sftpops.FS]

	lastUsed  atomic.Int64 // unix nanoseconds
	inflight  atomic.Int64
	destroyed atomic.Bool
	reason    atomic.Value // string: why the workspace is gone
	vanished  atomic.Value // string: why its box is gone, set once
}

// New returns the workspace cfg describes, reached through t.
func New(cfg Config, t Transport) *Workspace {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Workspace{cfg: cfg, t: t, logger: cfg.Logger}
	w.agent.sem = make(chan struct{}, 1)
	w.lastUsed.Store(time.Now().UnixNano())
	return w
}

// ID is the workspace's name.
func (w *Workspace) ID() string { return w.cfg.ID }

// Root is the workspace directory in the box.
func (w *Workspace) Root() string { return w.cfg.Root }

// Logger is the workspace's logger.
func (w *Workspace) Logger() *slog.Logger { return w.logger }

// Use marks the workspace busy until the returned function is called.
func (w *Workspace) Use() func() {
	w.inflight.Add(1)
	w.lastUsed.Store(time.Now().UnixNano())
	return func() {
		w.lastUsed.Store(time.Now().UnixNano())
		w.inflight.Add(-1)
	}
}

// IdleFor is how long no call has used the workspace; zero while one
// runs, and once it is destroyed.
func (w *Workspace) IdleFor() time.Duration {
	if w.inflight.Load() > 0 || w.destroyed.Load() {
		return 0
	}
	return time.Since(time.Unix(0, w.lastUsed.Load()))
}

// Destroyed says whether the workspace was destroyed.
func (w *Workspace) Destroyed() bool { return w.destroyed.Load() }

// GoneErr is ErrNotExist once the workspace was destroyed or its box
// found gone, nil before.
func (w *Workspace) GoneErr(op, p string) error {
	if w.destroyed.Load() {
		reason, _ := w.reason.Load().(string)
		return opsapi.E(op, p, opsapi.ErrNotExist, fmt.Errorf("workspace %s", reason))
	}
	if why := w.Gone(); why != "" {
		return opsapi.E(op, p, opsapi.ErrNotExist, fmt.Errorf("workspace %s is gone: %s", w.cfg.ID, why))
	}
	return nil
}

// Gone says why the workspace's box is no longer there, "" while it is
// (opsapi.GoneReporter).
func (w *Workspace) Gone() string {
	r, _ := w.vanished.Load().(string)
	return r
}

// Vanish records that the box was removed outside the broker (the first
// reason stays), logs it, and returns the ErrNotExist every call answers
// from now on.
func (w *Workspace) Vanish(op, why string) error {
	if w.vanished.CompareAndSwap(nil, why) {
		w.logger.Warn("the workspace's box is gone", "reason", why)
	}
	return opsapi.E(op, w.cfg.ID, opsapi.ErrNotExist, fmt.Errorf("workspace %s is gone: %s", w.cfg.ID, w.Gone()))
}

// Destroy removes the box (opsapi.Destroyer). Destroying twice is not an
// error.
func (w *Workspace) Destroy(ctx context.Context) error {
	return w.DestroyWith(ctx, "deleted")
}

// DestroyWith removes the box through the Transport and ends the agent
// connection; calls then answer ErrNotExist saying "workspace <reason>".
// A failed removal may be retried.
func (w *Workspace) DestroyWith(ctx context.Context, reason string) error {
	if w.destroyed.Load() {
		return nil
	}
	w.reason.Store(reason)
	if w.destroyed.Swap(true) {
		return nil
	}
	if err := w.t.Destroy(ctx); err != nil {
		w.destroyed.Store(false)
		return err
	}
	w.CloseAgent()
	w.logger.Info("workspace removed", "reason", reason)
	return nil
}

// Discard removes the box with a context of its own (the caller's may be
// what failed: a create cut short), logging a removal that failed.
func (w *Workspace) Discard(reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.DestroyWith(ctx, reason); err != nil {
		w.logger.Warn("the workspace could not be removed", "reason", reason, "err", err)
	}
}

// Transport says whether the workspace's calls go through its agent
// (opsapi.TransportReporter).
func (w *Workspace) Transport() opsapi.Transport {
	if w.cfg.NoAgent != "" {
		return opsapi.Transport{Detail: w.cfg.NoAgent}
	}
	return w.agent.report()
}

var (
	_ opsapi.Operations        = (*Workspace)(nil)
	_ opsapi.TreeOperations    = (*Workspace)(nil)
	_ opsapi.Resolver          = (*Workspace)(nil)
	_ opsapi.Destroyer         = (*Workspace)(nil)
	_ opsapi.TransportReporter = (*Workspace)(nil)
	_ opsapi.GoneReporter      = (*Workspace)(nil)
)
