package local

import (
	"context"
	"errors"

	"github.com/wsbroker/wsbroker/killtree"
	"github.com/wsbroker/wsbroker/opsapi"
)

// pids lists the workspace's live processes: its cgroup's members, or
// without cgroups the processes carrying its marker (which misses one that
// cleared its environment).
func (w *Workspace) pids() ([]int, error) {
	if w.cg != nil {
		return w.cg.Procs()
	}
	return killtree.MarkedPids(w.marker)
}

// Processes lists every live process of the workspace, those of running
// commands included.
func (w *Workspace) Processes(ctx context.Context) ([]opsapi.Process, error) {
	const op = "local.Processes"
	if w.isDestroyed() {
		return nil, opsapi.E(op, w.id, opsapi.ErrNotExist, errors.New("workspace destroyed"))
	}
	pids, err := w.pids()
	if err != nil {
		return nil, opsapi.E(op, w.id, nil, err)
	}
	out := make([]opsapi.Process, 0, len(pids))
	for _, p := range pids {
		out = append(out, opsapi.Process{PID: p, Command: killtree.Cmdline(p)})
	}
	w.pruneGroups()
	return out, nil
}

// KillProcesses ends the given processes, or all of the workspace's when
// pids is empty: SIGTERM, up to KillGrace, SIGKILL. A pid that is not the
// workspace's is ErrNotExist and nothing is killed.
func (w *Workspace) KillProcesses(ctx context.Context, pids []int) (int, error) {
	const op = "local.KillProcesses"
	if w.isDestroyed() {
		return 0, opsapi.E(op, w.id, opsapi.ErrNotExist, errors.New("workspace destroyed"))
	}
	defer w.pruneGroups()
	if len(pids) == 0 {
		if w.cg != nil {
			n, err := w.cg.KillAll(0, w.cfg.KillGrace)
			return n, wrapErr(op, w.id, err)
		}
		n, err := killtree.KillMarked(w.marker, w.cfg.KillGrace)
		return n, wrapErr(op, w.id, err)
	}
	mine, err := w.pids()
	if err != nil {
		return 0, opsapi.E(op, w.id, nil, err)
	}
	return killPids(op, pids, mine, w.cfg.KillGrace)
}

func wrapErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return opsapi.E(op, path, nil, err)
}

// pruneGroups removes the cgroups of finished commands whose background
// children have all gone.
func (w *Workspace) pruneGroups() {
	if w.cg == nil {
		return
	}
	names, _ := w.cg.Children()
	for _, n := range names {
		if g := w.cg.ChildGroup(n); g.Empty() {
			// A command still starting has an empty group for a moment;
			// its Exec recreates nothing, so only remove groups whose
			// command is done: those no Exec holds.
			if !w.running(n) {
				_ = g.Delete()
			}
		}
	}
}
