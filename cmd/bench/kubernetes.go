package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/backends/warmpool"
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

// kubePool is the warm pool both kubernetes targets configure: workspaces
// created with kubePoolOptions come from it (opCreateWarm); the default
// settings, opCreate's, are not the pool's.
var (
	kubePool        = kubernetes.PoolConfig{Spec: warmpool.Spec{Name: "bench", Size: 2, Memory: 1 << 30}}
	kubePoolOptions = []byte(`{"limits":{"memory":"1GiB"}}`)
)

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
			cfg.Pools = []kubernetes.PoolConfig{kubePool}
			b, err := kubernetes.New(cfg, env.Logger.With("backend", "kubernetes"))
			if err != nil {
				return nil, err
			}
			create := func(options []byte) func(context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
				return func(ctx context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
					ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: newBenchID(), Options: options})
					if err != nil {
						return nil, nil, err
					}
					return ws.(*kubernetes.Workspace), ws.(opsapi.Destroyer).Destroy, nil
				}
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
			poolFull := func(ctx context.Context) error {
				return waitFor(ctx, func() (bool, error) { return b.Pools()[0].Ready == kubePool.Size, nil })
			}
			newClient := s.NewClient
			s.NewClient = func(i int) (Client, error) {
				cl, err := newClient(i)
				if err == nil {
					cl[opCreate] = createFirstCommand(create(nil), nil)
					cl[opCreateWarm] = createFirstCommand(create(kubePoolOptions), poolFull)
				}
				return cl, err
			}
			return s, nil
		}}
}

// kubeHTTP drives a `broker serve` with the kubernetes backend on the
// test cluster, and the bench pool, through the Go client.
func kubeHTTP() Target {
	return brokerTarget{name: "kubernetes/http", backend: "kubernetes",
		pool: &warmPool{name: kubePool.Name, size: kubePool.Size, options: kubePoolOptions},
		config: func(agent string) (string, error) {
			kc, err := kubeconfig()
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("kubernetes:\n  kubeconfig: %q\n  agentBinary: %q\n  imagePullPolicy: Never\n"+
				"  pools:\n    - {name: %s, size: %d, memory: %d}\n", kc, agent, kubePool.Name, kubePool.Size, kubePool.Memory), nil
		}}.Target()
}
