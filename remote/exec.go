package remote

import (
	"context"
	"errors"
	"io"
	"path"
	"time"

	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// underProc reports whether the absolute path p is /proc or below it.
func underProc(p string) bool { return opsapi.Within("/proc", path.Clean(p)) }

// Exec runs req.Command as `Shell -c Command` in the box: through the
// agent, under a reaper of its own that kills the whole subtree at a
// deadline or cancel, with stdin, signals and a terminal as asked; or
// through the Fallback. The environment is the box's plus Config.Env and
// req.Env. Unless Config.HostCwd, a working directory under /proc, named
// or reached through links, is ErrPermission, a missing one ErrNotExist.
func (w *Workspace) Exec(ctx context.Context, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	op := w.op("Exec")
	defer w.Use()()
	if err := w.GoneErr(op, req.Cwd); err != nil {
		return opsapi.ExecResult{}, err
	}
	if err := remoteexec.CheckRequest(req, w.cfg.ReservedEnv...); err != nil {
		return opsapi.ExecResult{}, opsapi.E(op, req.Cwd, opsapi.ErrInvalid, err)
	}
	cwd := opsapi.Resolve(w.cfg.Root, req.Cwd)
	if err := w.checkCwd(ctx, op, req.Cwd, cwd); err != nil {
		return opsapi.ExecResult{}, err
	}
	a, err := w.Agent(ctx)
	if err != nil && (!errors.Is(err, ErrNoAgent) || w.cfg.Fallback == nil) {
		return opsapi.ExecResult{}, agentErr(ctx, op, req.Cwd, err)
	}
	// The box's OOM kill counter, read while the command starts and
	// again at its end, tells whether the kernel's OOM killer struck
	// meanwhile (in this command, or in one running beside it).
	before := make(chan int64, 1)
	go func() { before <- w.oomKills(ctx) }()
	var res opsapi.ExecResult
	if a != nil {
		env := append(append([]string(nil), w.cfg.Env...), req.Env...)
		if res, err = a.Exec(ctx, req, cwd, env, w.cfg.Exec); err != nil {
			err = opsapi.E(op, req.Cwd, nil, err)
		}
	} else {
		res, err = w.cfg.Fallback.Exec(ctx, req, cwd)
	}
	if b := <-before; err == nil && b >= 0 {
		if after := w.oomKills(context.WithoutCancel(ctx)); after > b {
			res.OOMKilled, res.MemoryLimit = true, w.cfg.MemoryLimit(context.WithoutCancel(ctx))
		}
	}
	return res, err
}

// checkCwd refuses a working directory under /proc, by its name or by
// what it resolves to (sftpops.FS.CheckCwd). Without the file operations
// of a Fallback (a box with no SFTP server) only the name is checked; the
// command itself enters the directory, so nothing outside sees it.
func (w *Workspace) checkCwd(ctx context.Context, op, given, cwd string) error {
	if w.cfg.HostCwd {
		return nil
	}
	if underProc(cwd) {
		return opsapi.E(op, given, opsapi.ErrPermission, errors.New("working directory under /proc refused"))
	}
	if cwd == w.cfg.Root {
		return nil
	}
	fs, err := w.Files(ctx, op, given)
	if w.cfg.Fallback != nil && errors.Is(err, opsapi.ErrUnavailable) && ctx.Err() == nil {
		return nil
	}
	if err != nil {
		return err
	}
	return fs.CheckCwd(ctx, op, given, cwd)
}

// oomKills is the box's OOM kill count, -1 when it cannot be read or is
// not asked for (sftpops.FS.OOMKills).
func (w *Workspace) oomKills(ctx context.Context) int64 {
	if w.cfg.MemoryLimit == nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fs, err := w.Files(ctx, w.op("oom"), "")
	if err != nil {
		return -1
	}
	return fs.OOMKills(ctx)
}

// Search runs `rg --json` in the box, started by the agent or the
// Fallback; see rgjson.Remote.Search. Ripgrep missing is ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	op := w.op("Search")
	defer w.Use()()
	if _, err := rgjson.Args(req); err != nil {
		return opsapi.SearchResult{}, err
	}
	fs, err := w.Files(ctx, op, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	remote := rgjson.Remote{Op: op, RgPath: w.cfg.Exec.RgPath, Where: w.cfg.Where,
		Start: func(ctx context.Context, argv []string, stderr io.Writer) (rgjson.Process, error) {
			a, err := w.Agent(ctx)
			switch {
			case errors.Is(err, ErrNoAgent) && w.cfg.Fallback != nil:
				return w.cfg.Fallback.StartSearch(ctx, argv, stderr)
			case err != nil:
				return nil, agentErr(ctx, op, req.Path, err)
			}
			p, err := a.Start(ctx, argv, w.cfg.Root, w.cfg.SearchEnv, stderr)
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
