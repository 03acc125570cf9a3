package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/execsftp"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// Workspace is one container: a remote.Workspace whose calls go through
// its agent, or, without one, through the engine's exec (box).
type Workspace struct {
	*remote.Workspace
	box     *box
	owner   string // the owning tenant, from LabelOwner
	created time.Time
}

// box is a workspace's container as its remote.Workspace reaches it: the
// Transport (the agent started in an exec, the container removed), and
// the Fallback of a workspace without an agent (the SFTP channel,
// commands under the remoteexec wrapper, searches in execs of their own).
type box struct {
	b        *Backend
	w        *remote.Workspace
	ws       *Workspace // the backend's, w within it
	id, cid  string     // the workspace's and its container's
	root     string
	agentDir string // its run directory on the host, "" for no agent
	disk     int64  // the size of the volume's own filesystem, 0 for none
	// volumes are the engine volumes to remove with the workspace; nil
	// is the one named as its container.
	volumes           []string
	logger            *slog.Logger
	runner            *remoteexec.Runner
	*execsftp.Channel // SFTP and Identity of the Fallback
}

// newWorkspace is the workspace id in container cid, with its agent's run
// directory on the host (agentDir, "" for none).
func (b *Backend) newWorkspace(id, cid, root, agentDir string, created time.Time) *Workspace {
	x := &box{b: b, id: id, cid: cid, root: root, agentDir: agentDir, logger: b.logger.With("workspace", id)}
	rc := b.remoteexecConfig()
	rc.Headroom = x.pidsHeadroom
	x.runner = remoteexec.New(x.start, x.run, rc, x.logger)
	x.Channel = execsftp.New(execsftp.Config{Op: "docker.sftp", Servers: b.sftpServers(), Logger: x.logger, Where: "in the container",
		Hint: "configure agentBinary or use an image with OpenSSH's sftp-server",
		Start: func(ctx context.Context, argv []string, stderr io.Writer) (execsftp.Process, error) {
			return x.startExec(ctx, execOpts{argv: argv, stdin: true, stderr: stderr})
		}})
	cfg := remote.Config{Op: "docker", ID: id, Root: root, Where: "in the container", Logger: x.logger, Exec: b.cfg.Exec,
		NoSync: !b.cfg.SyncWrites, AgentRetry: agentRetry, Fallback: x, MemoryLimit: x.memoryLimit}
	if agentDir == "" {
		cfg.NoAgent = b.agent.why
		if cfg.NoAgent == "" {
			cfg.NoAgent = "the workspace has no agent run directory"
		}
	}
	x.w = remote.New(cfg, x)
	x.ws = &Workspace{Workspace: x.w, box: x, created: created}
	return x.ws
}

// CreatedAt is when the workspace was created, kept in the container's
// labels so that it survives a broker restart.
func (w *Workspace) CreatedAt() time.Time { return w.created }

// Owner is the tenant the container's LabelOwner names (opsapi.OwnerReporter).
func (w *Workspace) Owner() string { return w.owner }

// ContainerID is the engine's ID of the workspace's container.
func (w *Workspace) ContainerID() string { return w.box.cid }

// engineErr classifies an engine error of an operation inside the
// workspace. Its container missing means it was removed behind the
// broker's back: the workspace is gone (GoneReporter), and the error says
// so in the broker's words, not the engine's.
func (x *box) engineErr(op string, err error) error {
	if err := x.w.GoneErr(op, ""); err != nil {
		return err
	}
	if cerrdefs.IsNotFound(err) {
		return x.w.Vanish(op, vanishedReason)
	}
	return engineErr(op, x.id, err)
}

// vanishedReason is what Gone says of a container removed outside the
// broker.
const vanishedReason = "its container was removed outside the broker"

// Vanished asks the engine whether the container is still there, after
// its agent could not be started (remote.Transport).
func (x *box) Vanished(ctx context.Context) string {
	if _, err := x.b.api.ContainerInspect(ctx, x.cid); cerrdefs.IsNotFound(err) {
		return vanishedReason
	}
	return ""
}

// Destroy removes the container (and so every process in it) and its
// volumes (remote.Transport).
func (x *box) Destroy(ctx context.Context) error {
	x.Channel.Close()
	x.w.CloseAgent()
	err := x.b.api.ContainerRemove(ctx, x.cid, container.RemoveOptions{Force: true, RemoveVolumes: true})
	for _, name := range x.volumeNames() {
		if err == nil || cerrdefs.IsNotFound(err) {
			err = x.b.api.VolumeRemove(ctx, name, true)
		}
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr("docker.Destroy", x.id, err)
	}
	if err := x.b.removeDisk(ctx, x.id); err != nil {
		return opsapi.E("docker.Destroy", x.id, nil, err)
	}
	x.b.workspaces.Forget(x.ws)
	if x.agentDir != "" {
		_ = os.RemoveAll(x.agentDir)
	}
	return nil
}

// volumeNames are the workspace's volumes: its own, or the pool member's
// and the claim's.
func (x *box) volumeNames() []string {
	if x.volumes != nil {
		return x.volumes
	}
	return []string{namePrefix + x.id}
}

// memoryLimit asks the engine for the container's memory limit, so the
// bash tool can name it beside an OOM kill. Only asked after one: the
// limit can differ per workspace and survives a broker restart only in
// the engine. 0 when the engine does not answer.
func (x *box) memoryLimit(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := x.b.api.ContainerInspect(ctx, x.cid)
	if err != nil || info.HostConfig == nil {
		return 0
	}
	return info.HostConfig.Memory
}

// Exec runs a command in an exec of its own under the remoteexec wrapper:
// its own process group and session, stdout and stderr on one stream, a
// marker in its environment (remote.Fallback). A deadline or cancel kills
// the whole tree through a second exec (the engine cannot kill an exec).
func (x *box) Exec(ctx context.Context, req opsapi.ExecRequest, cwd string) (opsapi.ExecResult, error) {
	return x.runner.Exec(ctx, req, cwd)
}

// StartSearch starts ripgrep in an exec of its own (remote.Fallback).
// Dropping an exec's stream does not stop it (nor does the engine offer a
// kill): a search that is cut short is killed by its marker.
func (x *box) StartSearch(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error) {
	marker := searchKey + "=" + randomID()
	p, err := x.startExec(ctx, execOpts{argv: argv, env: []string{marker}, stderr: stderr})
	if err != nil {
		return nil, opsapi.E("docker.Search", "", nil, err)
	}
	return &searchProc{p: p, x: x, marker: marker}, nil
}

// searchProc is ripgrep in an exec.
type searchProc struct {
	p      *execProc
	x      *box
	marker string
}

func (s *searchProc) Stdout() io.Reader { return s.p.Stdout() }
func (s *searchProc) Close()            { s.p.Close() }
func (s *searchProc) Abandon()          { go s.x.killMarked(s.marker) }

func (s *searchProc) Wait() (int, error) {
	st, err := s.p.Wait()
	if err != nil {
		return 0, fmt.Errorf("search exec: %w", err)
	}
	return st.Code, nil
}

// searchKey marks the processes of one search.
const searchKey = "WSBROKER_SEARCH"

// killMarked kills, in the background of a call that has returned, the
// processes carrying marker.
func (x *box) killMarked(marker string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := x.runner.KillMarked(ctx, marker); err != nil && x.w.GoneErr("", "") == nil {
		x.logger.Debug("killing an abandoned search", "err", err)
	}
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	_ remote.Transport = (*box)(nil)
	_ remote.Fallback  = (*box)(nil)
)
