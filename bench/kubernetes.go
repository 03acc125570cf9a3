package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
	wsclient "github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// kubeconfig is the test cluster's (scripts/kube-cluster.sh up), from
// WSB_KUBECONFIG.
func kubeconfig() (string, error) {
	p := os.Getenv(testutil.KubeconfigEnv)
	if p == "" {
		return "", fmt.Errorf("the kubernetes targets need a cluster: set %s (scripts/kube-cluster.sh up)", testutil.KubeconfigEnv)
	}
	return p, nil
}

// kubeTargets are the kubernetes backend's: in-process, and through a
// `broker serve` and the Go client, each with opCreate beside the file and
// command rows.
func kubeTargets() []Target {
	return []Target{kubeInProcess(), kubeHTTP()}
}

func kubeInProcess() Target {
	return Target{Name: "kubernetes/in-process", Backend: "kubernetes", Via: ViaInProcess,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			kc, err := kubeconfig()
			if err != nil {
				return nil, err
			}
			bin, err := env.sftpServer(ctx)
			if err != nil {
				return nil, err
			}
			cfg := kubernetes.NewConfig()
			cfg.Identity, cfg.Kubeconfig, cfg.AgentBinary, cfg.ImagePullPolicy = "wsbroker-bench", kc, bin, "Never"
			b, err := kubernetes.New(cfg, env.Logger.With("backend", "kubernetes"))
			if err != nil {
				return nil, err
			}
			create := func(ctx context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
				ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: newBenchID()})
				if err != nil {
					return nil, nil, err
				}
				return ws.(*kubernetes.Workspace), ws.(opsapi.Destroyer).Destroy, nil
			}
			ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: newBenchID()})
			if err != nil {
				return nil, errors.Join(err, b.Close())
			}
			destroy := ws.(opsapi.Destroyer).Destroy
			s, err := inProcessSession(ctx, env, ws, func(ctx context.Context) error { return errors.Join(destroy(ctx), b.Close()) })
			if err != nil {
				return nil, err
			}
			newClient := s.NewClient
			s.NewClient = func(i int) (Client, error) {
				cl, err := newClient(i)
				if err == nil {
					cl[opCreate] = createFirstCommand(create, nil)
				}
				return cl, err
			}
			return s, nil
		}}
}

func kubeHTTP() Target {
	return Target{Name: "kubernetes/http", Backend: "kubernetes", Via: ViaHTTP,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			kc, err := kubeconfig()
			if err != nil {
				return nil, err
			}
			bin, err := env.sftpServer(ctx)
			if err != nil {
				return nil, err
			}
			conf := filepath.Join(env.TempDir, "kubernetes-broker.yaml")
			yaml := fmt.Sprintf("kubernetes:\n  kubeconfig: %q\n  agentBinary: %q\n  imagePullPolicy: Never\n", kc, bin)
			if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
				return nil, err
			}
			proc, err := startBroker(ctx, env, "--config", conf)
			if err != nil {
				return nil, err
			}
			c := wsclient.New(proc.URL, proc.Token)
			info, err := c.CreateWorkspace(ctx, "kubernetes", nil)
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
					out[opCreate] = createFirstCommand(func(ctx context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
						info, err := cl.CreateWorkspace(ctx, "kubernetes", nil)
						if err != nil {
							return nil, nil, err
						}
						return cl.WorkspaceFor(info), func(ctx context.Context) error { return cl.DeleteWorkspace(ctx, info.ID) }, nil
					}, nil)
					return out, nil
				},
				Close: func(ctx context.Context) error {
					return errors.Join(c.DeleteWorkspace(ctx, info.ID), proc.Stop())
				},
			}, nil
		}}
}
