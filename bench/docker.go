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
	wsclient "github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
)

// dockerImage is the image the docker targets run.
const dockerImage = docker.DefaultImage

// sftpServer builds cmd/wsb-sftp-server (static) once into the run's
// temporary directory, for the backend to mount into containers.
func (e *Env) sftpServer(ctx context.Context) (string, error) {
	e.sftpOnce.Do(func() {
		gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil {
			e.sftpErr = fmt.Errorf("finding the module: %w", err)
			return
		}
		bin := filepath.Join(e.TempDir, docker.SFTPServerName)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wsb-sftp-server")
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

// dockerWorkspace creates a workspace on a new docker backend; done
// destroys it and closes the backend.
func dockerWorkspace(ctx context.Context, env *Env) (_ *docker.Workspace, done func(context.Context) error, _ error) {
	bin, err := env.sftpServer(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg := docker.NewConfig()
	cfg.Identity = "wsbroker-bench"
	cfg.DefaultImage = dockerImage
	cfg.SFTPServerBinary = bin
	b, err := docker.New(cfg, env.Logger.With("backend", "docker"))
	if err != nil {
		return nil, nil, err
	}
	ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: fmt.Sprintf("bench-%d", time.Now().UnixNano())})
	if err != nil {
		return nil, nil, errors.Join(err, b.Close())
	}
	dw, ok := ws.(*docker.Workspace)
	done = func(ctx context.Context) error {
		return errors.Join(ws.(opsapi.Destroyer).Destroy(ctx), b.Close())
	}
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
			ws, done, err := dockerWorkspace(ctx, env)
			if err != nil {
				return nil, err
			}
			s, err := inProcessSession(ctx, env, ws, done)
			if err != nil {
				return nil, err
			}
			s.NewClient = withCreate(s.NewClient, env)
			return s, nil
		}}
}

// opCreate is a new workspace until its first command has completed.
// The call also destroys it, and that is timed too, so the row is an
// upper bound of issue 4's create-to-first-command.
const opCreate = "op.create-first-command"

// withCreate adds opCreate to each client: docker's workspaces are
// containers, so creating one is an operation worth a row.
func withCreate(newClient func(int) (Client, error), env *Env) func(int) (Client, error) {
	return func(i int) (Client, error) {
		cl, err := newClient(i)
		if err != nil {
			return nil, err
		}
		cl[opCreate] = func(ctx context.Context) error {
			ws, done, err := dockerWorkspace(ctx, env)
			if err != nil {
				return err
			}
			res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: "true"})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("true exited %d", res.ExitCode)
			}
			return errors.Join(err, done(context.WithoutCancel(ctx)))
		}
		return cl, nil
	}
}

// dockerHTTP drives a `broker serve` with the docker backend (the
// workspace image, the SFTP server built for the run) through the Go
// client: issue 4's targets are through the broker.
func dockerHTTP() Target {
	return Target{Name: "docker/http", Backend: "docker", Via: ViaHTTP,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			bin, err := env.sftpServer(ctx)
			if err != nil {
				return nil, err
			}
			conf := filepath.Join(env.TempDir, "docker-broker.yaml")
			yaml := fmt.Sprintf("docker:\n  defaultImage: %q\n  sftpServerBinary: %q\n", dockerImage, bin)
			if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
				return nil, err
			}
			proc, err := startBroker(ctx, env, "--config", conf)
			if err != nil {
				return nil, err
			}
			c := wsclient.New(proc.URL, proc.Token)
			info, err := c.CreateWorkspace(ctx, "docker", nil)
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
					out[opCreate] = func(ctx context.Context) error {
						info, err := cl.CreateWorkspace(ctx, "docker", nil)
						if err != nil {
							return err
						}
						res, err := cl.WorkspaceFor(info).Exec(ctx, opsapi.ExecRequest{Command: "true"})
						if err == nil && res.ExitCode != 0 {
							err = fmt.Errorf("true exited %d", res.ExitCode)
						}
						return errors.Join(err, cl.DeleteWorkspace(context.WithoutCancel(ctx), info.ID))
					}
					return out, nil
				},
				Close: func(ctx context.Context) error {
					return errors.Join(c.DeleteWorkspace(ctx, info.ID), proc.Stop())
				},
			}, nil
		}}
}

// dockerRaw is the floor beneath the docker backend: one plain Docker
// API exec per operation in a workspace's container (create, attach,
// read to the end, inspect): `true`, and `cat` of the 4 KiB file.
func dockerRaw() Target {
	return Target{Name: "docker/raw", Backend: "docker", Via: ViaRaw,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			ws, done, err := dockerWorkspace(ctx, env)
			if err != nil {
				return nil, err
			}
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
