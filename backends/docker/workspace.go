package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Workspace is one container: files over the SFTP channel, commands in
// execs of their own under the remoteexec wrapper.
type Workspace struct {
	b       *Backend
	id      string
	cid     string // container ID
	owner   string // the owning tenant, from LabelOwner
	root    string
	created time.Time
	disk    int64 // the size of the volume's own filesystem, 0 for none
	// volumes are the engine volumes to remove with the workspace; nil
	// is the one named as its container.
	volumes []string
	logger  *slog.Logger
	runner  *remoteexec.Runner

	// The in-box agent: its host run directory ("" for none), its live
	// connection, its last failed start and how often it was restarted.
	agentDir      string
	agentSem      chan struct{} // held while an agent is started
	agentLive     atomic.Pointer[agentclient.Client]
	agentFailed   atomic.Pointer[agentFailure]
	agentRestarts atomic.Int64

	chanSem chan struct{} // held while the channel is looked at or opened
	ch      *channel      // guarded by chanSem
	fs      atomic.Pointer[sftpops.FS]

	lastUsed  atomic.Int64 // unix nanoseconds
	inflight  atomic.Int64
	destroyed atomic.Bool
	reason    atomic.Value // string: why the workspace is gone
	vanished  atomic.Value // string: why its container is gone, set once
}

func newWorkspace(b *Backend, id, cid, root string, created time.Time) *Workspace {
	w := &Workspace{
		b:        b,
		id:       id,
		cid:      cid,
		root:     root,
		created:  created,
		logger:   b.logger.With("workspace", id),
		chanSem:  make(chan struct{}, 1),
		agentSem: make(chan struct{}, 1),
	}
	rc := b.remoteexecConfig()
	rc.Headroom = w.pidsHeadroom
	w.runner = remoteexec.New(w.start, w.run, rc, w.logger)
	w.lastUsed.Store(time.Now().UnixNano())
	return w
}

// ID is the workspace's name.
func (w *Workspace) ID() string { return w.id }

// Root is the workspace directory inside the container.
func (w *Workspace) Root() string { return w.root }

// CreatedAt is when the workspace was created, kept in the container's
// labels so that it survives a broker restart.
func (w *Workspace) CreatedAt() time.Time { return w.created }

// Owner is the tenant the container's LabelOwner names (opsapi.OwnerReporter).
func (w *Workspace) Owner() string { return w.owner }

// ContainerID is the engine's ID of the workspace's container.
func (w *Workspace) ContainerID() string { return w.cid }

// use marks the workspace busy until the returned function is called.
func (w *Workspace) use() func() {
	w.inflight.Add(1)
	w.lastUsed.Store(time.Now().UnixNano())
	return func() {
		w.lastUsed.Store(time.Now().UnixNano())
		w.inflight.Add(-1)
	}
}

// idleFor is how long no call has used the workspace; zero while one runs.
func (w *Workspace) idleFor() time.Duration {
	if w.inflight.Load() > 0 || w.destroyed.Load() {
		return 0
	}
	return time.Since(time.Unix(0, w.lastUsed.Load()))
}

// gone is ErrNotExist once the workspace was destroyed or expired.
func (w *Workspace) gone(op, p string) error {
	if w.destroyed.Load() {
		reason, _ := w.reason.Load().(string)
		return opsapi.E(op, p, opsapi.ErrNotExist, fmt.Errorf("workspace %s", reason))
	}
	return nil
}

// engineErr classifies an engine error of an operation inside the
// workspace. Its container missing means it was removed behind the
// broker's back: the workspace is gone (GoneReporter), and the error says
// so in the broker's words, not the engine's.
func (w *Workspace) engineErr(op string, err error) error {
	if err := w.gone(op, ""); err != nil {
		return err
	}
	if cerrdefs.IsNotFound(err) {
		w.vanished.CompareAndSwap(nil, vanishedReason)
		w.logger.Warn("the workspace's container is gone", "container", w.cid, "err", err)
		return opsapi.E(op, w.id, opsapi.ErrNotExist, fmt.Errorf("workspace %s is gone: %s", w.id, vanishedReason))
	}
	return engineErr(op, w.id, err)
}

// vanishedReason is what Gone says of a container removed outside the
// broker.
const vanishedReason = "its container was removed outside the broker"

// Gone says why the workspace's container is no longer there, "" while it
// is (opsapi.GoneReporter).
func (w *Workspace) Gone() string {
	r, _ := w.vanished.Load().(string)
	return r
}

// files is the workspace's SFTP-backed file operations, made at the first
// use, when the channel has told the account's ids.
func (w *Workspace) files(ctx context.Context, op, p string) (*sftpops.FS, error) {
	if err := w.gone(op, p); err != nil {
		return nil, err
	}
	if fs := w.fs.Load(); fs != nil {
		return fs, nil
	}
	id, err := w.identity(ctx)
	if err != nil {
		return nil, err
	}
	fs := sftpops.New(w.sftpClient, w.root, sftpops.Options{Identity: &id, Logger: w.logger, Op: "docker",
		NoSync: !w.b.cfg.SyncWrites, ReadFile: w.readFile, WriteFile: w.writeFile, ReadDir: w.readDir})
	w.fs.CompareAndSwap(nil, fs)
	return w.fs.Load(), nil
}

// closeChannel ends the SFTP channel, if one is open.
func (w *Workspace) closeChannel() {
	w.chanSem <- struct{}{}
	c := w.ch
	w.ch = nil
	<-w.chanSem
	if c != nil {
		c.close()
	}
}

// Destroy removes the container (killing every process in it) and its
// volume. Destroying twice is not an error.
func (w *Workspace) Destroy(ctx context.Context) error {
	return w.destroy(ctx, "deleted")
}

func (w *Workspace) destroy(ctx context.Context, reason string) error {
	w.reason.Store(reason)
	if w.destroyed.Swap(true) {
		return nil
	}
	w.closeChannel()
	w.closeAgent()
	err := w.b.api.ContainerRemove(ctx, w.cid, container.RemoveOptions{Force: true, RemoveVolumes: true})
	for _, name := range w.volumeNames() {
		if err == nil || cerrdefs.IsNotFound(err) {
			err = w.b.api.VolumeRemove(ctx, name, true)
		}
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		w.destroyed.Store(false) // may be retried
		return engineErr("docker.Destroy", w.id, err)
	}
	if err := w.b.removeDisk(ctx, w.id); err != nil {
		w.destroyed.Store(false) // may be retried
		return opsapi.E("docker.Destroy", w.id, nil, err)
	}
	w.b.forget(w)
	if w.agentDir != "" {
		_ = os.RemoveAll(w.agentDir)
	}
	w.logger.Info("workspace removed", "reason", reason)
	return nil
}

// volumeNames are the workspace's volumes: its own, or the pool member's
// and the claim's.
func (w *Workspace) volumeNames() []string {
	if w.volumes != nil {
		return w.volumes
	}
	return []string{namePrefix + w.id}
}

// Open opens a regular file for reading over SFTP; see sftpops.FS.Open.
func (w *Workspace) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	done := w.use()
	fs, err := w.files(ctx, "docker.Open", p)
	if err != nil {
		done()
		return nil, err
	}
	rc, err := fs.Open(ctx, p)
	if err != nil {
		done()
		return nil, err
	}
	return &usedReader{ReadCloser: rc, done: done}, nil
}

// usedReader keeps the workspace busy until the file is closed.
type usedReader struct {
	io.ReadCloser
	done func()
	once atomic.Bool
}

func (r *usedReader) Close() error {
	if !r.once.Swap(true) {
		defer r.done()
	}
	return r.ReadCloser.Close()
}

// Access checks p against the container user's ids; see sftpops.FS.Access.
func (w *Workspace) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	defer w.use()()
	fs, err := w.files(ctx, "docker.Access", p)
	if err != nil {
		return err
	}
	return fs.Access(ctx, p, mode)
}

// WriteFile replaces p atomically; see sftpops.FS.WriteFile.
func (w *Workspace) WriteFile(ctx context.Context, p string, r io.Reader) error {
	defer w.use()()
	fs, err := w.files(ctx, "docker.WriteFile", p)
	if err != nil {
		return err
	}
	return fs.WriteFile(ctx, p, r)
}

// Mkdir creates p and its parents; see sftpops.FS.Mkdir.
func (w *Workspace) Mkdir(ctx context.Context, p string) error {
	defer w.use()()
	fs, err := w.files(ctx, "docker.Mkdir", p)
	if err != nil {
		return err
	}
	return fs.Mkdir(ctx, p)
}

// Stat describes p, following links; see sftpops.FS.Stat.
func (w *Workspace) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	defer w.use()()
	fs, err := w.files(ctx, "docker.Stat", p)
	if err != nil {
		return opsapi.FileInfo{}, err
	}
	return fs.Stat(ctx, p)
}

// ReadDir lists p; see sftpops.FS.ReadDir.
func (w *Workspace) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	defer w.use()()
	fs, err := w.files(ctx, "docker.ReadDir", p)
	if err != nil {
		return nil, err
	}
	return fs.ReadDir(ctx, p)
}

// RealPath resolves every link in p inside the container; see
// sftpops.FS.RealPath.
func (w *Workspace) RealPath(ctx context.Context, p string) (string, error) {
	defer w.use()()
	fs, err := w.files(ctx, "docker.RealPath", p)
	if err != nil {
		return "", err
	}
	return fs.RealPath(ctx, p)
}

// Glob finds files with fd's semantics, walking the tree over SFTP; see
// sftpops.FS.Glob.
func (w *Workspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	defer w.use()()
	fs, err := w.files(ctx, "docker.Glob", req.Dir)
	if err != nil {
		return opsapi.GlobResult{}, err
	}
	return fs.Glob(ctx, req)
}

// underProc reports whether the absolute path p is /proc or below it.
func underProc(p string) bool { return opsapi.Within("/proc", path.Clean(p)) }

// Exec runs req.Command as `Shell -c Command` in the container, in one
// exec, under the remoteexec wrapper: its own process group and session,
// stdout and stderr on one stream, a marker in its environment. A deadline
// or cancel kills the whole tree through a second exec (the engine cannot
// kill an exec). The environment is the image's plus LANG=C.UTF-8,
// TERM=dumb and req.Env. A working directory under /proc, named or reached
// through links, is ErrPermission (the shape of CVE-2024-21626); a missing
// one ErrNotExist.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	const op = "docker.Exec"
	defer w.use()()
	if err := w.gone(op, req.Cwd); err != nil {
		return opsapi.ExecResult{}, err
	}
	if err := remoteexec.CheckRequest(req); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrInvalid, err)
	}
	cwd := opsapi.Resolve(w.root, req.Cwd)
	if underProc(cwd) {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrPermission, errors.New("working directory under /proc refused"))
	}
	if cwd != w.root {
		if err := w.checkCwd(ctx, op, req.Cwd, cwd); err != nil {
			return opsapi.ExecResult{}, err
		}
	}
	// The container's OOM kill counter, read while the exec starts and
	// again at its end, tells whether the kernel's OOM killer struck
	// meanwhile (in this command, or in one running beside it).
	before := make(chan int64, 1)
	go func() { before <- w.oomKills(ctx) }()
	var res opsapi.ExecResult
	c, err := w.agentClient(ctx, op)
	switch {
	case err != nil:
		return opsapi.ExecResult{}, err
	case c != nil:
		res, err = c.Exec(ctx, req, cwd, req.Env, w.b.cfg.Exec)
		if err != nil {
			err = opsapi.E(op, req.Cwd, nil, err)
		}
	default:
		res, err = w.runner.Exec(ctx, req, cwd)
	}
	if b := <-before; err == nil && b >= 0 {
		if a := w.oomKills(context.WithoutCancel(ctx)); a > b {
			res.OOMKilled = true
			res.MemoryLimit = w.memoryLimit(context.WithoutCancel(ctx))
		}
	}
	return res, err
}

// oomKills reads the container's OOM kill count through its files; -1
// when it cannot be read (sftpops.FS.OOMKills).
func (w *Workspace) oomKills(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fs, err := w.files(ctx, "docker.oom", "")
	if err != nil {
		return -1
	}
	return fs.OOMKills(ctx)
}

// memoryLimit asks the engine for the container's memory limit, so the
// bash tool can name it beside an OOM kill. Only asked after one: the
// limit can differ per workspace and survives a broker restart only in
// the engine. 0 when the engine does not answer.
func (w *Workspace) memoryLimit(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := w.b.api.ContainerInspect(ctx, w.cid)
	if err != nil || info.HostConfig == nil {
		return 0
	}
	return info.HostConfig.Memory
}

// checkCwd refuses a working directory that resolves, or has an ancestor
// that resolves, under /proc inside the container; see
// sftpops.FS.CheckCwd.
//
// Without an SFTP channel (an image with no server and none injected)
// only the lexical check has been made; the engine still never sees the
// directory, so the CVE's path stays closed.
func (w *Workspace) checkCwd(ctx context.Context, op, given, cwd string) error {
	fs, err := w.files(ctx, op, given)
	if errors.Is(err, opsapi.ErrUnavailable) && ctx.Err() == nil {
		return nil
	}
	if err != nil {
		return err
	}
	return fs.CheckCwd(ctx, op, given, cwd)
}

// Search runs `rg --json` in the container, in an exec of its own; see
// rgjson.Remote.Search. Ripgrep missing in the image is ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	const op = "docker.Search"
	defer w.use()()
	if _, err := rgjson.Args(req); err != nil {
		return opsapi.SearchResult{}, err
	}
	fs, err := w.files(ctx, op, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	remote := rgjson.Remote{Op: op, RgPath: w.b.cfg.RgPath, Where: "in the container",
		Start: func(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error) {
			a, err := w.agentClient(ctx, op)
			if err != nil {
				return nil, err
			}
			if a != nil {
				p, err := a.Start(ctx, argv, w.root, nil, stderr)
				if err != nil {
					return nil, opsapi.E(op, req.Path, nil, err)
				}
				return agentSearch{p}, nil
			}
			// Dropping an exec's stream does not stop it (nor does
			// the engine offer a kill): a search that is cut short
			// is killed by its marker.
			marker := searchKey + "=" + randomID()
			p, err := w.startExec(ctx, execOpts{argv: argv, env: []string{marker}, stderr: stderr})
			if err != nil {
				return nil, opsapi.E(op, req.Path, nil, err)
			}
			return &searchProc{p: p, w: w, marker: marker}, nil
		}}
	return remote.Search(ctx, fs, req)
}

// agentSearch is ripgrep run by the agent: closing its stream before rg
// exited kills it, so abandoning needs nothing more.
type agentSearch struct{ *agentclient.Process }

func (agentSearch) Abandon() {}

// searchProc is ripgrep in an exec.
type searchProc struct {
	p      *execProc
	w      *Workspace
	marker string
}

func (s *searchProc) Stdout() io.Reader { return s.p.Stdout() }
func (s *searchProc) Close()            { s.p.Close() }
func (s *searchProc) Abandon()          { go s.w.killMarked(s.marker) }

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
func (w *Workspace) killMarked(marker string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.runner.KillMarked(ctx, marker); err != nil && w.gone("", "") == nil {
		w.logger.Debug("killing an abandoned search", "err", err)
	}
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
