package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tools"
)

// How a target reaches its backend; rows of the same backend reached in-process and
// over HTTP are paired for the ratio table.
const (
	ViaInProcess = "in-process"
	ViaHTTP      = "http"
	ViaRaw       = "raw" // a baseline beneath the backend (e.g. a bare docker exec)
	// ViaSandboxHTTP is the local backend through the broker with its
	// sandbox on, beside ViaHTTP's unsandboxed one in the same run.
	ViaSandboxHTTP = "http+sandbox"
)

// Target is one way to reach a workspace.
type Target struct {
	// Name labels the target's rows, e.g. "local/http".
	Name string
	// Backend is the backend's registry name.
	Backend string
	// Via is ViaInProcess, ViaHTTP, ViaRaw or ViaMCP.
	Via string
	// Rows, when set, are the only rows the target can measure: a
	// scenario with none of them does not set the target up at all.
	Rows []string
	// Setup prepares a fresh, seeded workspace (starting whatever process
	// it needs). Each scenario gets its own session, so a broker's peak
	// RSS belongs to that scenario alone.
	Setup func(ctx context.Context, env *Env) (*Session, error)
}

// Session is a set-up target.
type Session struct {
	// NewClient returns the i-th simulated caller. Over HTTP each client
	// has its own connection pool, as separate hosts would; in-process
	// clients share the workspace.
	NewClient func(i int) (Client, error)
	// PID is the process doing the work, whose RSS is reported.
	PID int
	// Broker, set by targets that run a `broker serve` of their own,
	// lets a scenario speak to it beyond the clients' ops (the hostile
	// scenario's raw requests).
	Broker *brokerProcess
	// Close destroys the workspace and stops what Setup started.
	Close func(ctx context.Context) error
}

// Op is one timed call. A failed call, including a tool result with
// isError set, returns an error.
type Op func(ctx context.Context) error

// Client is one simulated caller: the ops it can time, by row name. A
// target that cannot do an op leaves it out and the row is skipped.
type Client map[string]Op

// backendTargets are each backend's targets, in table order. ssh, docker
// and kubernetes are opt-in (-backends): they need root and sshd, a
// Docker engine and the workspace image, or a cluster.
var backendTargets = map[string]func() []Target{
	"local":  localTargets,
	"ssh":    func() []Target { return []Target{sshRaw(), sshInProcess(), sshHTTP()} },
	"docker": func() []Target { return []Target{dockerRaw(), dockerInProcess(), dockerHTTP()} },
	// kubernetes needs the test cluster (WSB_KUBECONFIG).
	"kubernetes": kubeTargets,
}

// localTargets are the local backend's targets; the sandboxed one only
// as root, the only place the sandbox runs.
func localTargets() []Target {
	t := []Target{localRaw(), localInProcess(), localHTTP(), localMCP()}
	if os.Geteuid() == 0 {
		t = append(t, localSandboxHTTP())
	}
	return t
}

// offersAny reports whether t can measure one of rows.
func (t Target) offersAny(rows []string) bool {
	if t.Rows == nil {
		return true
	}
	for _, r := range rows {
		if slices.Contains(t.Rows, r) {
			return true
		}
	}
	return false
}

// targets lists the targets of the named backends, in table order.
func targets(backends []string) []Target {
	var out []Target
	for _, b := range backends {
		out = append(out, backendTargets[b]()...)
	}
	return out
}

// localInProcess calls a local workspace and a tools.Toolbox directly.
func localInProcess() Target {
	return Target{Name: "local/in-process", Backend: "local", Via: ViaInProcess,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			dir, err := os.MkdirTemp(env.TempDir, "local-")
			if err != nil {
				return nil, err
			}
			b, err := local.New(local.Config{StateDir: dir, Sandbox: local.SandboxConfig{Mode: "off"}}, env.Logger.With("backend", "local"))
			if err != nil {
				return nil, errors.Join(err, os.RemoveAll(dir))
			}
			closeAll := func(ctx context.Context, ws opsapi.Workspace) error {
				var errs []error
				if d, ok := ws.(opsapi.Destroyer); ok {
					errs = append(errs, d.Destroy(ctx))
				}
				return errors.Join(append(errs, b.Close(), os.RemoveAll(dir))...)
			}
			ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: "bench"})
			if err != nil {
				return nil, errors.Join(err, closeAll(ctx, nil))
			}
			return inProcessSession(ctx, env, ws, func(ctx context.Context) error { return closeAll(ctx, ws) })
		}}
}

// inProcessSession seeds ws and calls it and a tools.Toolbox on it
// directly; closeWS destroys ws and whatever holds it.
func inProcessSession(ctx context.Context, env *Env, ws opsapi.Workspace, closeWS func(context.Context) error) (*Session, error) {
	ops, ok := ws.(opsapi.Operations)
	if !ok {
		return nil, errors.Join(fmt.Errorf("workspace %T lacks opsapi.Operations", ws), closeWS(ctx))
	}
	if err := seed(ctx, ops); err != nil {
		return nil, errors.Join(err, closeWS(ctx))
	}
	tb := tools.New(ws, tools.Options{Logger: env.Logger.With("workspace", "bench")})
	call := func(ctx context.Context, name string, args json.RawMessage, onUpdate tools.UpdateFunc) (tools.Result, error) {
		return tb.Call(ctx, name, args, onUpdate), nil
	}
	return &Session{
		PID: os.Getpid(),
		NewClient: func(i int) (Client, error) {
			return workspaceClient(ops, call, env.Config, i), nil
		},
		Close: func(ctx context.Context) error { return errors.Join(tb.Close(), closeWS(ctx)) },
	}, nil
}

// localHTTP drives a separate `broker serve` process through the Go
// client, so the broker's RSS is its own.
func localHTTP() Target {
	return Target{Name: "local/http", Backend: "local", Via: ViaHTTP, Setup: localHTTPSetup(sandboxFlags("off"))}
}

// localSandboxHTTP is localHTTP with the sandbox on (local.sandbox.mode:
// on), for the exec rows only: what the sandbox adds to a command.
func localSandboxHTTP() Target {
	return Target{Name: "local/http+sandbox", Backend: "local", Via: ViaSandboxHTTP, Rows: []string{opExecTrue, toolBashTrue},
		Setup: localHTTPSetup(sandboxFlags("on"))}
}

// sandboxFlags are `broker serve` flags setting local.sandbox.mode. The
// local targets but local/http+sandbox run unsandboxed whatever the
// default, so that the sandbox's cost is measured against a command
// without it.
func sandboxFlags(mode string) func(env *Env) ([]string, error) {
	return func(env *Env) ([]string, error) {
		p := filepath.Join(env.TempDir, "sandbox-"+mode+".yaml")
		if err := os.WriteFile(p, []byte("local:\n  sandbox:\n    mode: \""+mode+"\"\n"), 0o600); err != nil {
			return nil, err
		}
		return []string{"--config", p}, nil
	}
}

// localHTTPSetup starts a broker (with the flags flags returns, when set)
// and a seeded local workspace in it.
func localHTTPSetup(flags func(env *Env) ([]string, error)) func(ctx context.Context, env *Env) (*Session, error) {
	return func(ctx context.Context, env *Env) (*Session, error) {
		var extra []string
		if flags != nil {
			var err error
			if extra, err = flags(env); err != nil {
				return nil, err
			}
		}
		proc, err := startBroker(ctx, env, extra...)
		if err != nil {
			return nil, err
		}
		c := client.New(proc.URL, proc.Token)
		info, err := c.CreateWorkspace(ctx, "local", nil)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("creating a workspace: %w", err), proc.Stop())
		}
		if err := seed(ctx, c.WorkspaceFor(info)); err != nil {
			return nil, errors.Join(err, proc.Stop())
		}
		return &Session{
			PID:    proc.PID,
			Broker: proc,
			NewClient: func(i int) (Client, error) {
				ws := client.New(proc.URL, proc.Token).WorkspaceFor(info)
				return workspaceClient(ws, ws.CallTool, env.Config, i), nil
			},
			Close: func(ctx context.Context) error {
				return errors.Join(c.DeleteWorkspace(ctx, info.ID), proc.Stop())
			},
		}, nil
	}
}
