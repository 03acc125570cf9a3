package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	wsclient "github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
)

// brokerTarget is a `broker serve` with one backend, driven through the
// Go client: a seeded workspace for the file and command rows, and
// opCreate; with a pool, opCreateWarm too.
type brokerTarget struct {
	name    string
	backend string
	// config is the backend's section of the broker's YAML, given the
	// agent binary built for the run.
	config func(agent string) (string, error)
	pool   *warmPool
}

// warmPool is a pool a target's broker keeps: creates with options take
// its members; creates without options never do.
type warmPool struct {
	name    string
	size    int
	options []byte
}

func (bt brokerTarget) Target() Target {
	return Target{Name: bt.name, Backend: bt.backend, Via: ViaHTTP, Setup: bt.setup}
}

func (bt brokerTarget) setup(ctx context.Context, env *Env) (*Session, error) {
	bin, err := env.sftpServer(ctx)
	if err != nil {
		return nil, err
	}
	yaml, err := bt.config(bin)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(env.TempDir, bt.backend+"-broker.yaml")
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	proc, err := startBroker(ctx, env, "--config", conf)
	if err != nil {
		return nil, err
	}
	c := wsclient.New(proc.URL, proc.Token)
	info, err := c.CreateWorkspace(ctx, bt.backend, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating a workspace: %w", err), proc.Stop())
	}
	if err := seed(ctx, c.WorkspaceFor(info)); err != nil {
		return nil, errors.Join(err, c.DeleteWorkspace(ctx, info.ID), proc.Stop())
	}
	return &Session{
		PID: proc.PID,
		NewClient: func(i int) (Client, error) {
			cl := wsclient.New(proc.URL, proc.Token)
			ws := cl.WorkspaceFor(info)
			out := workspaceClient(ws, ws.CallTool, env.Config, i)
			create := func(options []byte) func(context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
				return func(ctx context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
					info, err := cl.CreateWorkspace(ctx, bt.backend, options)
					if err != nil {
						return nil, nil, err
					}
					return cl.WorkspaceFor(info), func(ctx context.Context) error { return cl.DeleteWorkspace(ctx, info.ID) }, nil
				}
			}
			out[opCreate] = createFirstCommand(create(nil), nil)
			if p := bt.pool; p != nil {
				out[opCreateWarm] = createFirstCommand(create(p.options), bt.poolFull(proc))
			}
			return out, nil
		},
		Close: func(ctx context.Context) error {
			return errors.Join(c.DeleteWorkspace(ctx, info.ID), proc.Stop())
		},
	}, nil
}

// poolFull waits until the broker's metrics say the pool is full again.
func (bt brokerTarget) poolFull(proc *brokerProcess) func(context.Context) error {
	want := fmt.Sprintf("wsbroker_pool_ready{backend=%q,pool=%q} %d\n", bt.backend, bt.pool.name, bt.pool.size)
	return func(ctx context.Context) error {
		return waitFor(ctx, func() (bool, error) {
			m, err := proc.get(ctx, "/metrics")
			return strings.Contains(m, want), err
		})
	}
}
