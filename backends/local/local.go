package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/backends/local/cgroups"
	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"github.com/wsbroker/wsbroker/killtree"
	"github.com/wsbroker/wsbroker/opsapi"
)

// Backend creates workspaces as directories under Config.StateDir.
type Backend struct {
	cfg    Config
	dir    string // StateDir/workspaces, symlinks resolved
	logger *slog.Logger
	closed atomic.Bool
	// started is when New ran: a write temporary older than that was
	// left by a crash.
	started time.Time
	cg      *cgroups.Base // nil: process groups and markers only
	sb      *sandboxer    // nil: commands run unconfined
	// cgMu orders creating a workspace's group against removing the
	// base group once the last workspace is gone.
	cgMu sync.Mutex
	// opened are the workspaces given out and not destroyed, whose
	// directories Close lets go of before it unmounts their disks.
	openedMu sync.Mutex
	opened   map[*Workspace]struct{}
}

// dropBase removes the base cgroup once no workspace group is left in it,
// so that test runs and short-lived brokers leave nothing behind.
func (b *Backend) dropBase() {
	if b.cg == nil {
		return
	}
	b.cgMu.Lock()
	defer b.cgMu.Unlock()
	_ = b.cg.Remove()
}

// New checks cfg (zero fields take NewConfig's defaults), creates
// StateDir/workspaces and returns the backend.
func New(cfg Config, logger *slog.Logger) (*Backend, error) {
	set := cfg.Limits.Limits
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, opsapi.E("local.New", "", opsapi.ErrInvalid, err)
	}
	if fi, err := os.Stat(cfg.Shell); err != nil || fi.IsDir() {
		return nil, opsapi.E("local.New", cfg.Shell, opsapi.ErrInvalid, fmt.Errorf("shell not found: %s", cfg.Shell))
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(cfg.StateDir, "workspaces")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, opsapi.E("local.New", dir, nil, err)
	}
	// Confinement compares paths textually, so the root must be the
	// canonical path that realpath and the kernel report.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, opsapi.E("local.New", dir, nil, err)
	}
	b := &Backend{cfg: cfg, dir: dir, logger: logger.With("backend", "local"), started: time.Now()}
	if err := b.openCgroups(); err != nil {
		return nil, err
	}
	b.openLimits(set)
	if err := b.openSandbox(); err != nil {
		return nil, opsapi.E("local.New", "", opsapi.ErrUnavailable, err)
	}
	if m := b.missing(sandboxLayers); len(m) > 0 {
		b.logger.Warn("confinement: layers that do not hold on this host (GET /v1/workspaces/{id} shows each workspace's)", "unavailable", m)
	}
	if m := b.missing(cfg.Sandbox.Require); len(m) > 0 {
		b.logger.Warn("sandbox: required layers do not hold on this host: workspaces will be refused", "missing", m)
	}
	b.openDisks()
	b.reconcile()
	return b, nil
}

// openCgroups sets up the base cgroup, or decides on the fallback and
// says so once.
func (b *Backend) openCgroups() error {
	if b.cfg.Cgroups == "off" {
		b.logger.Info("cgroups disabled by configuration: commands are contained by process groups and markers only")
		return nil
	}
	mode := map[string]cgroups.Mode{"v1": cgroups.V1, "v2": cgroups.V2}[b.cfg.Cgroups]
	// One base group per state directory, so a restarted broker finds
	// exactly what its predecessor left.
	sum := sha256.Sum256([]byte(b.dir))
	cg, err := cgroups.Open(cgroups.Config{Name: "wsbroker-" + hex.EncodeToString(sum[:6]), Mode: mode})
	if err != nil {
		if mode != cgroups.Auto {
			return opsapi.E("local.New", "", opsapi.ErrUnavailable, err)
		}
		if runtime.GOOS != "linux" {
			// Nor is there a /proc to find marked processes by.
			b.logger.Warn("cgroups unavailable: they exist only on Linux; commands are contained by their process group only: "+
				"a process that leaves its group escapes the kill, background processes cannot be listed, and no limits apply", "os", runtime.GOOS)
			return nil
		}
		b.logger.Warn("cgroups unavailable: commands are contained by process groups and markers only; "+
			"a process that leaves its group and clears its environment escapes the kill, and no limits apply", "err", err)
		return nil
	}
	b.cg = cg
	b.logger.Info("cgroups in use", "mode", cg.Mode().String(), "path", cg.Path(), "controllers", cg.Controllers())
	for _, l := range []cgroups.Limits{withoutUnlimited(b.cfg.Limits.Limits), b.cfg.CommandLimits} {
		if m := cg.Missing(l); len(m) > 0 {
			b.logger.Warn("configured limits not enforced: controllers missing", "controllers", m)
		}
	}
	return nil
}

// reconcile kills what a previous run of the broker left: every process
// of every command (no one waits for them any more, and a command killed
// with the broker must not outlive it), and the groups of workspaces that
// no longer exist. Without cgroups the workspace markers find them.
func (b *Backend) reconcile() {
	killed := 0
	if b.cg != nil {
		names, err := b.cg.Children()
		if err != nil {
			b.logger.Warn("reconcile: listing cgroups", "err", err)
		}
		for _, name := range names {
			ws, err := b.cg.Group(name, cgroups.Limits{})
			if err != nil {
				b.logger.Warn("reconcile", "workspace", name, "err", err)
				continue
			}
			if _, err := os.Stat(filepath.Join(b.dir, name)); err != nil {
				n, _ := ws.Kill()
				killed += n
				if err := ws.Delete(); err != nil {
					b.logger.Warn("reconcile: removing the group of a deleted workspace", "workspace", name, "err", err)
				}
				continue
			}
			cmds, _ := ws.Children()
			for _, c := range cmds {
				g := ws.ChildGroup(c)
				n, _ := g.Kill()
				killed += n
				if err := g.Delete(); err != nil {
					b.logger.Warn("reconcile: removing a command's group", "workspace", name, "group", c, "err", err)
				}
			}
		}
	} else if entries, err := os.ReadDir(b.dir); err == nil {
		for _, e := range entries {
			if e.IsDir() && validID.MatchString(e.Name()) {
				n, _ := killtree.KillMarked(workspaceMarker(b.dir, e.Name()), b.cfg.KillGrace)
				killed += n
			}
		}
	}
	if killed > 0 {
		b.logger.Warn("reconcile: killed processes a previous run left", "killed", killed)
	}
}

// workspaceMarker is the KEY=VALUE entry in every command of workspace id.
// The directory makes it unique to this backend instance: two state dirs
// may both hold a workspace "x".
func workspaceMarker(dir, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(dir, id)))
	return workspaceKey + "=" + id + "@" + hex.EncodeToString(sum[:8])
}

// Name is the backend's registry name.
func (b *Backend) Name() string { return "local" }

// validID: a safe single path component, no leading dot or dash.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// createOptions are the options Create accepts.
type createOptions struct {
	// Limits override the backend's workspace limits field by field,
	// each at most the configured one; they need cgroups.
	Limits *Limits `json:"limits"`
}

// Create makes the directory of a new workspace. An ID that is not a safe
// name (letters, digits, '.', '_', '-'; at most 128; not starting with '.'
// or '-'), unknown options or limits above the configured ones are
// ErrInvalid; an existing workspace is ErrExist.
func (b *Backend) Create(ctx context.Context, spec opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	const op = "local.Create"
	if b.closed.Load() {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrUnavailable, errors.New("backend closed"))
	}
	if !validID.MatchString(spec.ID) {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("invalid workspace id %q", spec.ID))
	}
	o, err := parseOptions(spec.Options)
	if err != nil {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("options: %w", err))
	}
	limits := b.cfg.Limits
	if o.Limits != nil {
		if err := o.Limits.Validate(); err != nil {
			return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("options: limits: %w", err))
		}
		if err := withinConfigured(*o.Limits, limits); err != nil {
			return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("options: %w", err))
		}
		limits = o.Limits.Merge(limits)
	}
	if !limits.Limits.IsZero() && b.cg == nil {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, errors.New("options: limits need cgroups, which this broker cannot use"))
	}
	if m := b.missing(b.cfg.Sandbox.Require); len(m) > 0 {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrUnavailable, fmt.Errorf("sandbox: required layers do not hold on this host: %v", m))
	}
	if err := ctx.Err(); err != nil {
		return nil, opsapi.E(op, spec.ID, nil, err)
	}
	dir := filepath.Join(b.dir, spec.ID)
	// Sandboxed, the directory is its own uid's alone.
	mode := fs.FileMode(0o755)
	if b.sb != nil {
		mode = 0o700
	}
	if err := os.Mkdir(dir, mode); err != nil {
		return nil, opsapi.E(op, spec.ID, nil, err)
	}
	if limits.DiskBytes > 0 {
		if err := b.makeDisk(ctx, spec.ID, dir, limits.DiskBytes, mode); err != nil {
			os.Remove(dir)
			return nil, err
		}
	}
	undo := func() {
		if limits.DiskBytes > 0 {
			_ = b.dropDisk(context.WithoutCancel(ctx), spec.ID, dir)
		}
		os.Remove(dir)
	}
	if err := b.saveLimits(spec.ID, limits); err != nil {
		undo()
		return nil, opsapi.E(op, spec.ID, nil, err)
	}
	ws, err := b.open(spec.ID, limits)
	if err != nil {
		undo()
		b.dropLimits(spec.ID)
		return nil, err
	}
	b.logger.Info("workspace created", "workspace", spec.ID, "root", dir, "limits", limits)
	return ws, nil
}

// List finds the workspaces that exist in StateDir, e.g. after a restart,
// so that they can be used or destroyed again. It also starts removing,
// in the background, the temporary files of writes a crash interrupted
// (see Workspace.removeStaleTemps): that walks every workspace's whole
// tree, which with thousands of workspaces must not hold up a start.
func (b *Backend) List(ctx context.Context) (map[string]opsapi.Workspace, error) {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, opsapi.E("local.List", b.dir, nil, err)
	}
	out := make(map[string]opsapi.Workspace, len(entries))
	for _, e := range entries {
		if !e.IsDir() || !validID.MatchString(e.Name()) {
			continue
		}
		// An existing group keeps its limits; one that is gone (a
		// reboot) is made again with the limits saved at Create.
		ws, err := b.open(e.Name(), b.loadLimits(e.Name()))
		if err != nil {
			b.logger.Warn("skipping unreadable workspace", "workspace", e.Name(), "err", err)
			continue
		}
		out[e.Name()] = ws
	}
	go b.sweepStaleTemps(out)
	return out, nil
}

// sweepStaleTemps removes the stale temporaries of each workspace, one
// workspace at a time, until done or the backend is closed.
func (b *Backend) sweepStaleTemps(found map[string]opsapi.Workspace) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for id, w := range found {
		if b.closed.Load() {
			return
		}
		if n := w.(*Workspace).removeStaleTemps(ctx, b.started); n > 0 {
			b.logger.Info("removed interrupted writes' temporary files", "workspace", id, "count", n)
		}
	}
}

// Close stops the backend from creating workspaces; existing workspaces
// and their processes stay.
//
// Workspace cgroups with no process left are removed (a command run later
// makes its workspace's group again, with the saved limits), and so is
// the base group once empty, so short-lived brokers and test runs leave
// no cgroup behind.
func (b *Backend) Close() error {
	b.closed.Store(true)
	if b.cg != nil {
		b.cgMu.Lock()
		names, _ := b.cg.Children()
		for _, n := range names {
			if g, err := b.cg.Group(n, cgroups.Limits{}); err == nil && g.Empty() {
				_ = g.Delete()
			}
		}
		b.cgMu.Unlock()
	}
	b.dropBase()
	b.closeDisks()
	return nil
}

// ensureGroup makes the workspace's cgroup again when it is gone (removed
// by Close), with the limits saved at Create.
func (w *Workspace) ensureGroup() error {
	if w.cg == nil || w.cg.Exists() {
		return nil
	}
	w.b.cgMu.Lock()
	defer w.b.cgMu.Unlock()
	// The same path as w.cg: only the directories are made again.
	_, err := w.b.cg.Group(w.id, w.b.loadLimits(w.id).Limits)
	return err
}

// limitsFile is where a workspace's limits are kept across restarts,
// outside the workspace so its commands cannot change them.
func (b *Backend) limitsFile(id string) string {
	return filepath.Join(b.cfg.StateDir, "limits", id+".json")
}

func (b *Backend) saveLimits(id string, l Limits) error {
	if l.IsZero() {
		return nil
	}
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.limitsFile(id)), 0o700); err != nil {
		return err
	}
	return os.WriteFile(b.limitsFile(id), data, 0o600)
}

// loadLimits is what saveLimits kept, or else the configured cgroup
// limits and the disk the workspace has: its image's size, none without
// one (a workspace made without limits), whatever size is configured now.
func (b *Backend) loadLimits(id string) Limits {
	configured := Limits{Limits: b.cfg.Limits.Limits}
	if fi, err := os.Stat(b.diskImage(id)); err == nil {
		configured.DiskBytes = fi.Size()
	}
	data, err := os.ReadFile(b.limitsFile(id))
	if err != nil {
		return configured
	}
	var l Limits
	if err := json.Unmarshal(data, &l); err != nil || l.Validate() != nil {
		b.logger.Warn("unreadable saved limits; using the configured ones", "workspace", id, "err", err)
		return configured
	}
	return l
}

func (b *Backend) dropLimits(id string) { _ = os.Remove(b.limitsFile(id)) }

func (b *Backend) open(id string, limits Limits) (*Workspace, error) {
	dir := filepath.Join(b.dir, id)
	if limits.DiskBytes > 0 {
		if err := b.mountDisk(id, dir); err != nil {
			return nil, opsapi.E("local.open", id, opsapi.ErrUnavailable, err)
		}
	}
	uid := -1
	if b.sb != nil {
		var err error
		if uid, err = b.claimUID(id); err != nil {
			return nil, opsapi.E("local.open", id, opsapi.ErrUnavailable, err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, opsapi.E("local.open", id, nil, err)
	}
	var cg *cgroups.Group
	if b.cg != nil {
		b.cgMu.Lock()
		cg, err = b.cg.Group(id, limits.Limits)
		b.cgMu.Unlock()
		if err != nil {
			root.Close()
			return nil, opsapi.E("local.open", id, opsapi.ErrUnavailable, err)
		}
	}
	w := &Workspace{
		cg:     cg,
		disk:   limits.DiskBytes,
		b:      b,
		uid:    uid,
		id:     id,
		root:   filepath.ToSlash(dir),
		fsroot: root,
		cfg:    b.cfg,
		logger: b.logger.With("workspace", id),
		marker: workspaceMarker(b.dir, id),
		groups: map[int]struct{}{},
		active: map[string]bool{},
	}
	b.openedMu.Lock()
	if b.opened == nil {
		b.opened = map[*Workspace]struct{}{}
	}
	b.opened[w] = struct{}{}
	b.openedMu.Unlock()
	return w, nil
}

// Workspace is one local workspace: a directory that every file operation
// is confined to, and where commands run.
type Workspace struct {
	id     string
	disk   int64    // the size of its own filesystem (loopfs), 0 for none
	root   string   // canonical absolute path of the directory
	fsroot *os.Root // every file access goes through it
	cfg    Config
	logger *slog.Logger
	marker string         // KEY=VALUE in every command's environment
	cg     *cgroups.Group // the workspace's cgroup; nil without cgroups
	b      *Backend
	uid    int // the sandbox's uid and gid for this workspace; -1 unsandboxed

	// life is held shared by each command's start, for its fork, and
	// exclusively by Destroy, which so never misses a starting command.
	life      sync.RWMutex
	mu        sync.Mutex
	destroyed bool
	sp        *sandbox.Spawner // the confined thread commands start from; nil until the first sandboxed one
	groups    map[int]struct{} // process groups that may still have members
	active    map[string]bool  // cgroup names of commands still running
}

// ID is the workspace's name.
func (w *Workspace) ID() string { return w.id }

// Root is the absolute host path of the workspace directory.
func (w *Workspace) Root() string { return w.root }

// Confinement is what confines the workspace's commands on this host.
func (w *Workspace) Confinement() opsapi.Confinement {
	c := w.b.confinement(w.uid)
	c.Cgroup = w.cg != nil
	return c
}

func (w *Workspace) isDestroyed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.destroyed
}

// Destroy kills every process the workspace's commands left running
// (every process carrying its marker, and the tracked process groups that
// still hold one), then removes the directory. Destroying twice is not an
// error.
func (w *Workspace) Destroy(ctx context.Context) error {
	w.life.Lock()
	w.mu.Lock()
	if w.destroyed {
		w.mu.Unlock()
		w.life.Unlock()
		return nil
	}
	w.destroyed = true
	if w.sp != nil {
		w.sp.Close()
		w.sp = nil
	}
	groups := make([]int, 0, len(w.groups))
	for g := range w.groups {
		groups = append(groups, g)
	}
	w.groups = map[int]struct{}{}
	w.mu.Unlock()
	w.life.Unlock()

	var errs []error
	var killed int
	if w.cg != nil {
		// Everything the workspace ran is in its group: nothing that
		// left the process group or cleared its environment survives.
		n, err := w.cg.KillAll(0, w.cfg.KillGrace)
		killed += n
		if err != nil {
			errs = append(errs, err)
		}
		if err := w.cg.Delete(); err != nil {
			errs = append(errs, err)
		}
		w.b.dropBase()
	} else {
		n, err := w.killLeftovers(groups)
		killed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	w.fsroot.Close()
	w.b.openedMu.Lock()
	delete(w.b.opened, w)
	w.b.openedMu.Unlock()
	if err := w.removeDisk(); err != nil {
		errs = append(errs, opsapi.E("local.Destroy", w.id, nil, err))
	}
	w.b.dropLimits(w.id)
	if err := removeAll(w.root); err != nil {
		errs = append(errs, opsapi.E("local.Destroy", w.id, nil, err))
	}
	if err := removeAll(w.b.tmpDir(w.id)); err != nil {
		errs = append(errs, opsapi.E("local.Destroy", w.id, nil, err))
	}
	w.logger.Info("workspace destroyed", "killed", killed, "err", errors.Join(errs...))
	return errors.Join(errs...)
}

// removeAll removes dir even where a command left directories without
// write or search permission (which stops a non-root broker).
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// lookPath finds an executable by name or path.
func lookPath(name string) (string, error) { return exec.LookPath(name) }

// tempPattern matches WriteFile's temporary names.
var tempPattern = regexp.MustCompile(`^\..+\.tmp-[0-9a-f]{16}$`)

// removeStaleTemps deletes WriteFile temporaries that a crash left behind
// (regular files named .<name>.tmp-<16 hex>) last written before since,
// the backend's start, however recently: one broker holds a state
// directory (broker serve locks it), so none of those can belong to a
// write in progress, while a write of this run (the sweep runs in the
// background) is newer. The walk never follows links and every removal
// goes through the root.
func (w *Workspace) removeStaleTemps(ctx context.Context, since time.Time) int {
	n := 0
	_ = filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || ctx.Err() != nil {
			return ctx.Err()
		}
		if !d.Type().IsRegular() || !tempPattern.MatchString(d.Name()) {
			return nil
		}
		if fi, err := d.Info(); err != nil || !fi.ModTime().Before(since) {
			return nil
		}
		rel, err := filepath.Rel(w.root, p)
		if err == nil && w.fsroot.Remove(rel) == nil {
			n++
		}
		return nil
	})
	return n
}

// Every tool the local backend serves, plus realpath and Destroy.
var (
	_ opsapi.Backend             = (*Backend)(nil)
	_ opsapi.Rediscoverer        = (*Backend)(nil)
	_ opsapi.Workspace           = (*Workspace)(nil)
	_ opsapi.Operations          = (*Workspace)(nil)
	_ opsapi.ReadOperations      = (*Workspace)(nil)
	_ opsapi.WriteOperations     = (*Workspace)(nil)
	_ opsapi.EditOperations      = (*Workspace)(nil)
	_ opsapi.BashOperations      = (*Workspace)(nil)
	_ opsapi.GrepOperations      = (*Workspace)(nil)
	_ opsapi.FindOperations      = (*Workspace)(nil)
	_ opsapi.LsOperations        = (*Workspace)(nil)
	_ opsapi.Resolver            = (*Workspace)(nil)
	_ opsapi.Destroyer           = (*Workspace)(nil)
	_ opsapi.ConfinementReporter = (*Workspace)(nil)
)

var _ opsapi.ProcessManager = (*Workspace)(nil)
