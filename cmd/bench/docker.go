package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/warmpool"
	"github.com/wsbroker/wsbroker/opsapi"
)

// dockerImage is the image the docker targets run.
const dockerImage = docker.DefaultImage

// sftpServer builds cmd/wsb-agent (static) once into the run's
// temporary directory, for the backend to mount into containers.
func (e *Env) sftpServer(ctx context.Context) (string, error) {
	e.sftpOnce.Do(func() {
		gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil {
			e.sftpErr = fmt.Errorf("finding the module: %w", err)
			return
		}
		bin := filepath.Join(e.TempDir, docker.SFTPServerName)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wsb-agent")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			e.sftpErr = fmt.Errorf("building %s: %v: %s", docker.SFTPServerName, err, out)
			return
		}
		e.sftpBin = bin
	})
	return e.sftpBin, e.sftpErr
}

// benchPool is the warm pool the docker targets configure: workspaces
// created with poolOptions come from it (opCreateWarm); the default
// options do not match it, so opCreate stays a cold create.
var (
	benchPool   = docker.PoolConfig{Spec: warmpool.Spec{Name: "bench", Size: 2}, Pids: 4000}
	poolOptions = []byte(`{"limits":{"pids":4000}}`)
)

// dockerBackend is a docker backend with the run's SFTP server and
// pools.
func dockerBackend(ctx context.Context, env *Env, pools []docker.PoolConfig) (*docker.Backend, error) {
	bin, err := env.sftpServer(ctx)
	if err != nil {
		return nil, err
	}
	cfg := docker.NewConfig()
	cfg.Identity = "wsbroker-bench"
	cfg.DefaultImage = dockerImage
	cfg.AgentBinary = bin
	cfg.Pools = pools
	return docker.New(cfg, env.Logger.With("backend", "docker"))
}

// newBenchID is a workspace id of its own for each create.
func newBenchID() string { return fmt.Sprintf("bench-%d", time.Now().UnixNano()) }

// dockerWorkspace creates a workspace on b; done destroys it.
func dockerWorkspace(ctx context.Context, b *docker.Backend, options []byte) (_ *docker.Workspace, done func(context.Context) error, _ error) {
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: newBenchID(), Options: options})
	if err != nil {
		return nil, nil, err
	}
	done = ws.(opsapi.Destroyer).Destroy
	dw, ok := ws.(*docker.Workspace)
	if !ok {
		return nil, nil, errors.Join(fmt.Errorf("docker workspace is a %T", ws), done(ctx))
	}
	return dw, done, nil
}

// dockerInProcess calls a docker-backend workspace (a container of
// dockerImage) and a tools.Toolbox directly.
func dockerInProcess() Target {
	return Target{Name: "docker/in-process", Backend: "docker", Via: ViaInProcess,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			b, err := dockerBackend(ctx, env, []docker.PoolConfig{benchPool})
			if err != nil {
				return nil, err
			}
			ws, done, err := dockerWorkspace(ctx, b, nil)
			if err != nil {
				return nil, errors.Join(err, b.Close())
			}
			s, err := inProcessSession(ctx, env, ws, func(ctx context.Context) error { return errors.Join(done(ctx), b.Close()) })
			if err != nil {
				return nil, err
			}
			newClient := s.NewClient
			s.NewClient = func(i int) (Client, error) {
				cl, err := newClient(i)
				if err != nil {
					return nil, err
				}
				poolFull := func(ctx context.Context) error {
					return waitFor(ctx, func() (bool, error) { return b.Pools()[0].Ready == benchPool.Size, nil })
				}
				create := func(options []byte) func(context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
					return func(ctx context.Context) (opsapi.BashOperations, func(context.Context) error, error) {
						return dockerWorkspace(ctx, b, options)
					}
				}
				cl[opCreate] = createFirstCommand(create(nil), nil)
				cl[opCreateWarm] = createFirstCommand(create(poolOptions), poolFull)
				return cl, nil
			}
			return s, nil
		}}
}

// opCreate is a new workspace until its first command has completed;
// opCreateWarm the same from the warm pool. Deleting it (and, for the
// pool, waiting until it is full again) is not timed.
const (
	opCreate     = "op.create-first-command"
	opCreateWarm = "op.create-warm-first-command"
)

// createFirstCommand is the op that creates a workspace with create and
// runs `true` in it. It leaves the workspace's removal, then settle, to
// run untimed.
func createFirstCommand(create func(context.Context) (opsapi.BashOperations, func(context.Context) error, error),
	settle func(context.Context) error) Op {
	return func(ctx context.Context) error {
		ws, done, err := create(ctx)
		if err != nil {
			return err
		}
		res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "true"})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true exited %d", res.ExitCode)
		}
		return errors.Join(err, Untimed(ctx, func() error {
			ctx := context.WithoutCancel(ctx)
			if err := done(ctx); err != nil || settle == nil {
				return err
			}
			return settle(ctx)
		}))
	}
}

// waitFor polls cond until it holds, fails, or a minute passes.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// dockerHTTP drives a `broker serve` with the docker backend (the
// workspace image, the SFTP server built for the run, the bench pool)
// through the Go client: issue 4's targets are through the broker.
func dockerHTTP() Target {
	return brokerTarget{name: "docker/http", backend: "docker",
		pool: &warmPool{name: benchPool.Name, size: benchPool.Size, options: poolOptions},
		config: func(agent string) (string, error) {
			return fmt.Sprintf("docker:\n  defaultImage: %q\n  agentBinary: %q\n  pools:\n    - {name: %s, size: %d, pids: %d}\n",
				dockerImage, agent, benchPool.Name, benchPool.Size, benchPool.Pids), nil
		}}.Target()
}

// dockerRaw is the floor beneath the docker backend: one plain Docker
// API exec per operation in a workspace's container (create, attach,
// read to the end, inspect): `true`, and `cat` of the 4 KiB file.
func dockerRaw() Target {
	return Target{Name: "docker/raw", Backend: "docker", Via: ViaRaw,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			b, err := dockerBackend(ctx, env, nil)
			if err != nil {
				return nil, err
			}
			ws, destroy, err := dockerWorkspace(ctx, b, nil)
			if err != nil {
				return nil, errors.Join(err, b.Close())
			}
			done := func(ctx context.Context) error { return errors.Join(destroy(ctx), b.Close()) }
			if err := ws.WriteFile(ctx, file4K, bytes.NewReader(content4K)); err != nil {
				if errors.Is(err, opsapi.ErrNotExist) {
					err = errors.Join(ws.Mkdir(ctx, path.Dir(file4K)), ws.WriteFile(ctx, file4K, bytes.NewReader(content4K)))
				}
				if err != nil {
					return nil, errors.Join(err, done(ctx))
				}
			}
			api, err := client.NewClientWithOpts(client.WithHost(docker.DefaultHost), client.WithAPIVersionNegotiation())
			if err != nil {
				return nil, errors.Join(err, done(ctx))
			}
			cid, file := ws.ContainerID(), path.Join(ws.Root(), file4K)
			rawTrue := func(ctx context.Context) error { return rawExec(ctx, api, cid, []string{"true"}, 0) }
			return &Session{
				PID: os.Getpid(),
				NewClient: func(int) (Client, error) {
					return Client{
						opExecTrue: rawTrue,
						// The bash tool's baseline too, measured in the
						// same turns as the tool's row.
						toolBashTrue: rawTrue,
						opRead4K:     func(ctx context.Context) error { return rawExec(ctx, api, cid, []string{"cat", file}, size4K) },
					}, nil
				},
				Close: func(ctx context.Context) error { return errors.Join(api.Close(), done(ctx)) },
			}, nil
		}}
}

// rawExec is one Docker API exec round trip: create, attach (which
// starts it), read to the end, inspect for the exit code.
func rawExec(ctx context.Context, api *client.Client, cid string, cmd []string, want int64) error {
	ex, err := api.ContainerExecCreate(ctx, cid, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	hj, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return err
	}
	n, err := stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
	hj.Close()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%v wrote %d bytes, want %d", cmd, n, want)
	}
	ins, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return err
	}
	if ins.ExitCode != 0 {
		return fmt.Errorf("%v exited %d", cmd, ins.ExitCode)
	}
	return nil
}
