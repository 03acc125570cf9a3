package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Workspace is one pod: files and commands through its agent.
type Workspace struct {
	b       *Backend
	id      string
	pod     string
	owner   string
	root    string
	created time.Time
	memory  int64  // the container's memory limit, for an OOM kill's report
	member  bool   // an unclaimed warm pool member, named as its pod
	store   string // the container that writes the agent's binary
	logger  *slog.Logger

	agentSem  chan struct{} // held while an agent is started
	agentLive atomic.Pointer[agentclient.Client]
	agentConn atomic.Pointer[streamConn] // the live agent's exec stream
	fs        atomic.Pointer[sftpops.FS]

	destroyed atomic.Bool
	reason    atomic.Value // string: why the workspace is gone
	vanished  atomic.Value // string: why its pod is gone, set once
}

func newWorkspace(b *Backend, id, pod, owner, root string, created time.Time) *Workspace {
	return &Workspace{b: b, id: id, pod: pod, owner: owner, root: root, created: created, store: storeContainerName,
		logger: b.logger.With("workspace", id), agentSem: make(chan struct{}, 1)}
}

// ID is the workspace's name.
func (w *Workspace) ID() string { return w.id }

// Root is the workspace directory inside the pod.
func (w *Workspace) Root() string { return w.root }

// CreatedAt is when the workspace was created, kept on its pod.
func (w *Workspace) CreatedAt() time.Time { return w.created }

// Owner is the tenant the pod's annotation names (opsapi.OwnerReporter).
func (w *Workspace) Owner() string { return w.owner }

// Pod is the name of the workspace's pod.
func (w *Workspace) Pod() string { return w.pod }

// Transport says the workspace's calls go through its agent
// (opsapi.TransportReporter): there is no other way in.
func (w *Workspace) Transport() opsapi.Transport {
	if c := w.agentLive.Load(); c != nil && !c.IsClosed() {
		return opsapi.Transport{Agent: true}
	}
	return opsapi.Transport{Agent: true, Detail: "the agent starts at the next call"}
}

// gone is ErrNotExist once the workspace was destroyed, or its pod was
// found deleted.
func (w *Workspace) gone(op, p string) error {
	if w.destroyed.Load() {
		reason, _ := w.reason.Load().(string)
		return opsapi.E(op, p, opsapi.ErrNotExist, fmt.Errorf("workspace %s", reason))
	}
	if why := w.Gone(); why != "" {
		return opsapi.E(op, p, opsapi.ErrNotExist, fmt.Errorf("workspace %s is gone: %s", w.id, why))
	}
	return nil
}

// vanishedReason is what Gone says of a pod deleted outside this broker.
const vanishedReason = "its pod was deleted outside this broker (by a replica sharing its identity, or kubectl)"

// Gone says why the workspace's pod is no longer there, "" while it is
// (opsapi.GoneReporter).
func (w *Workspace) Gone() string {
	r, _ := w.vanished.Load().(string)
	return r
}

// checkPod asks the API server whether the pod is still there (or being
// deleted), after its agent could not be reached: a replica may have
// deleted the workspace. Gone is set when it is not.
func (w *Workspace) checkPod(ctx context.Context) error {
	p, err := w.b.cs.CoreV1().Pods(w.b.cfg.Namespace).Get(ctx, w.pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil {
		w.vanished.CompareAndSwap(nil, vanishedReason)
		w.logger.Warn("the workspace's pod is gone", "pod", w.pod)
		return opsapi.E("kubernetes.agent", w.id, opsapi.ErrNotExist, fmt.Errorf("workspace %s is gone: %s", w.id, vanishedReason))
	}
	return nil
}

// Destroy deletes the pod (killing every process in it, its volumes with
// it). Destroying twice is not an error.
func (w *Workspace) Destroy(ctx context.Context) error {
	return w.destroy(ctx, "deleted")
}

func (w *Workspace) destroy(ctx context.Context, reason string) error {
	w.reason.Store(reason)
	if w.destroyed.Swap(true) {
		return nil
	}
	if err := w.b.deletePod(ctx, w.pod); err != nil {
		w.destroyed.Store(false) // may be retried
		return apiErr("kubernetes.Destroy", w.id, err)
	}
	if !w.member && claimed(w.pod, w.id) {
		// The claim would go with its pod (it is the claim's owner), but
		// only when the cluster's garbage collector gets to it: the id is
		// free at once this way.
		err := w.b.cs.CoreV1().ConfigMaps(w.b.cfg.Namespace).Delete(ctx, podName(w.id), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			w.logger.Warn("the workspace's claim could not be deleted; it goes with its pod", "err", err)
		}
	}
	// After the delete, and without waiting for the agent to end its
	// stream: it goes with its container.
	if sc := w.agentConn.Load(); sc != nil {
		sc.cut.Store(true)
	}
	w.closeAgent()
	w.b.forget(w)
	w.logger.Info("workspace removed", "reason", reason, "pod", w.pod)
	return nil
}

// files is the workspace's file operations over the agent, made at the
// first use, when the agent has told the account's ids.
func (w *Workspace) files(ctx context.Context, op, p string) (*sftpops.FS, error) {
	if err := w.gone(op, p); err != nil {
		return nil, err
	}
	if fs := w.fs.Load(); fs != nil {
		return fs, nil
	}
	a, err := w.agentClient(ctx)
	if err != nil {
		return nil, agentErr(op, p, err)
	}
	id, err := a.Identity(ctx)
	if err != nil {
		return nil, opsapi.E(op, p, opsapi.ErrUnavailable, err)
	}
	fs := sftpops.New(w.sftpClient, w.root, sftpops.Options{Identity: &sftpops.Identity{UID: id.UID, GIDs: id.GIDs},
		Logger: w.logger, Op: "kubernetes", NoSync: true, ReadFile: w.readFile, WriteFile: w.writeFile, ReadDir: w.readDir})
	w.fs.CompareAndSwap(nil, fs)
	return w.fs.Load(), nil
}

// agentErr is an error of reaching the agent: the workspace gone (its
// pod deleted) stays ErrNotExist, anything else is ErrUnavailable.
func agentErr(op, p string, err error) error {
	if errors.Is(err, opsapi.ErrNotExist) {
		return opsapi.E(op, p, nil, err)
	}
	return opsapi.E(op, p, opsapi.ErrUnavailable, err)
}

// sftpClient is the agent's SFTP channel (sftpops.ClientFunc).
func (w *Workspace) sftpClient(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
	a, err := w.agentClient(ctx)
	if err != nil {
		return nil, err
	}
	return a.SFTP(ctx, broken)
}

// readFile, readDir and writeFile are the agent's raw file calls (see
// sftpops.Options); the first two are retried once on a new connection
// when the old one was lost, as SFTP's calls are.
func (w *Workspace) readFile(ctx context.Context, abs string) (io.ReadCloser, error) {
	return retriedOnAgent(ctx, w, func(a *agentclient.Client) (io.ReadCloser, error) { return a.ReadFile(ctx, abs) })
}

func (w *Workspace) readDir(ctx context.Context, abs string) ([]opsapi.FileInfo, error) {
	return retriedOnAgent(ctx, w, func(a *agentclient.Client) ([]opsapi.FileInfo, error) { return a.ReadDir(ctx, abs) })
}

func (w *Workspace) writeFile(ctx context.Context, abs string, r io.Reader, sync bool) error {
	a, err := w.agentClient(ctx)
	if err != nil {
		return err
	}
	return a.WriteFile(ctx, abs, r, sync)
}

func retriedOnAgent[T any](ctx context.Context, w *Workspace, call func(*agentclient.Client) (T, error)) (T, error) {
	var zero T
	a, err := w.agentClient(ctx)
	if err != nil {
		return zero, err
	}
	v, err := call(a)
	if err != nil && a.IsClosed() && ctx.Err() == nil {
		if a, err = w.agentClient(ctx); err != nil {
			return zero, err
		}
		return call(a)
	}
	return v, err
}

// withFiles runs call on the workspace's file operations.
func withFiles[T any](ctx context.Context, w *Workspace, op, p string, call func(*sftpops.FS) (T, error)) (T, error) {
	fs, err := w.files(ctx, "kubernetes."+op, p)
	if err != nil {
		var zero T
		return zero, err
	}
	return call(fs)
}

// Open opens a regular file for reading; see sftpops.FS.Open.
func (w *Workspace) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	return withFiles(ctx, w, "Open", p, func(fs *sftpops.FS) (io.ReadCloser, error) { return fs.Open(ctx, p) })
}

// Access checks p against the pod user's ids; see sftpops.FS.Access.
func (w *Workspace) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	_, err := withFiles(ctx, w, "Access", p, func(fs *sftpops.FS) (struct{}, error) { return struct{}{}, fs.Access(ctx, p, mode) })
	return err
}

// WriteFile replaces p atomically; see sftpops.FS.WriteFile.
func (w *Workspace) WriteFile(ctx context.Context, p string, r io.Reader) error {
	_, err := withFiles(ctx, w, "WriteFile", p, func(fs *sftpops.FS) (struct{}, error) { return struct{}{}, fs.WriteFile(ctx, p, r) })
	return err
}

// Mkdir creates p and its parents; see sftpops.FS.Mkdir.
func (w *Workspace) Mkdir(ctx context.Context, p string) error {
	_, err := withFiles(ctx, w, "Mkdir", p, func(fs *sftpops.FS) (struct{}, error) { return struct{}{}, fs.Mkdir(ctx, p) })
	return err
}

// Stat describes p, following links; see sftpops.FS.Stat.
func (w *Workspace) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	return withFiles(ctx, w, "Stat", p, func(fs *sftpops.FS) (opsapi.FileInfo, error) { return fs.Stat(ctx, p) })
}

// ReadDir lists p; see sftpops.FS.ReadDir.
func (w *Workspace) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	return withFiles(ctx, w, "ReadDir", p, func(fs *sftpops.FS) ([]opsapi.FileInfo, error) { return fs.ReadDir(ctx, p) })
}

// RealPath resolves every link in p inside the pod; see
// sftpops.FS.RealPath.
func (w *Workspace) RealPath(ctx context.Context, p string) (string, error) {
	return withFiles(ctx, w, "RealPath", p, func(fs *sftpops.FS) (string, error) { return fs.RealPath(ctx, p) })
}

// Glob finds files with fd's semantics; see sftpops.FS.Glob.
func (w *Workspace) Glob(ctx context.Context, req opsapi.GlobRequest) (opsapi.GlobResult, error) {
	return withFiles(ctx, w, "Glob", req.Dir, func(fs *sftpops.FS) (opsapi.GlobResult, error) { return fs.Glob(ctx, req) })
}

// Symlink makes p a link to target; see sftpops.FS.Symlink.
func (w *Workspace) Symlink(ctx context.Context, target, p string) error {
	_, err := withFiles(ctx, w, "Symlink", p, func(fs *sftpops.FS) (struct{}, error) { return struct{}{}, fs.Symlink(ctx, target, p) })
	return err
}

// Readlink returns the target of the link at p; see sftpops.FS.Readlink.
func (w *Workspace) Readlink(ctx context.Context, p string) (string, error) {
	return withFiles(ctx, w, "Readlink", p, func(fs *sftpops.FS) (string, error) { return fs.Readlink(ctx, p) })
}

// Chmod sets p's permission bits; see sftpops.FS.Chmod.
func (w *Workspace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	_, err := withFiles(ctx, w, "Chmod", p, func(f *sftpops.FS) (struct{}, error) { return struct{}{}, f.Chmod(ctx, p, mode) })
	return err
}

// underProc reports whether the absolute path p is /proc or below it.
func underProc(p string) bool { return opsapi.Within("/proc", path.Clean(p)) }

// Exec runs req.Command as `Shell -c Command` in the pod through the
// agent: under a reaper of its own that kills the whole subtree at a
// deadline or cancel, with stdin, signals and a terminal as asked. The
// environment is the pod's plus req.Env. A working directory under
// /proc, named or reached through links, is ErrPermission; a missing one
// ErrNotExist.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	const op = "kubernetes.Exec"
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
		fs, err := w.files(ctx, op, req.Cwd)
		if err != nil {
			return opsapi.ExecResult{}, err
		}
		if err := fs.CheckCwd(ctx, op, req.Cwd, cwd); err != nil {
			return opsapi.ExecResult{}, err
		}
	}
	a, err := w.agentClient(ctx)
	if err != nil {
		return opsapi.ExecResult{}, agentErr(op, req.Cwd, err)
	}
	// The pod's OOM kill counter, read while the command starts and
	// again at its end, tells whether the kernel's OOM killer struck
	// meanwhile (in this command, or in one running beside it).
	before := make(chan int64, 1)
	go func() { before <- w.oomKills(ctx) }()
	res, err := a.Exec(ctx, req, cwd, req.Env, w.b.cfg.Exec)
	if b := <-before; err == nil && b >= 0 {
		if after := w.oomKills(context.WithoutCancel(ctx)); after > b {
			res.OOMKilled, res.MemoryLimit = true, w.memory
		}
	}
	if err != nil {
		return res, opsapi.E(op, req.Cwd, nil, err)
	}
	return res, nil
}

// oomKills is the container's OOM kill count, -1 when it cannot be read
// (sftpops.FS.OOMKills).
func (w *Workspace) oomKills(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fs, err := w.files(ctx, "kubernetes.oom", "")
	if err != nil {
		return -1
	}
	return fs.OOMKills(ctx)
}

// Search runs `rg --json` in the pod through the agent; see
// rgjson.Remote.Search. Ripgrep missing in the image is ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	const op = "kubernetes.Search"
	if _, err := rgjson.Args(req); err != nil {
		return opsapi.SearchResult{}, err
	}
	fs, err := w.files(ctx, op, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	remote := rgjson.Remote{Op: op, RgPath: w.b.cfg.RgPath, Where: "in the pod",
		Start: func(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error) {
			a, err := w.agentClient(ctx)
			if err != nil {
				return nil, agentErr(op, req.Path, err)
			}
			p, err := a.Start(ctx, argv, w.root, nil, stderr)
			if err != nil {
				return nil, opsapi.E(op, req.Path, nil, err)
			}
			return agentSearch{p}, nil
		}}
	return remote.Search(ctx, fs, req)
}

// agentSearch is ripgrep run by the agent: closing its stream before rg
// exited kills it, so abandoning needs nothing more.
type agentSearch struct{ *agentclient.Process }

func (agentSearch) Abandon() {}

var (
	_ opsapi.Operations        = (*Workspace)(nil)
	_ opsapi.TreeOperations    = (*Workspace)(nil)
	_ opsapi.Destroyer         = (*Workspace)(nil)
	_ opsapi.OwnerReporter     = (*Workspace)(nil)
	_ opsapi.CreationTimer     = (*Workspace)(nil)
	_ opsapi.TransportReporter = (*Workspace)(nil)
	_ opsapi.GoneReporter      = (*Workspace)(nil)
)
