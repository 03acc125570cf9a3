package local

import (
	"bytes"
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Backend creates workspaces as directories under Config.StateDir.
type Backend struct {
	cfg    Config
	dir    string // StateDir/workspaces, symlinks resolved
	logger *slog.Logger
	closed atomic.Bool
}

// New checks cfg (zero fields take NewConfig's defaults), creates
// StateDir/workspaces and returns the backend.
func New(cfg Config, logger *slog.Logger) (*Backend, error) {
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
	return &Backend{cfg: cfg, dir: dir, logger: logger.With("backend", "local")}, nil
}

// Name is the backend's registry name.
func (b *Backend) Name() string { return "local" }

// validID: a safe single path component, no leading dot or dash.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// createOptions are the options Create accepts: none yet.
type createOptions struct{}

// Create makes the directory of a new workspace. An ID that is not a safe
// name (letters, digits, '.', '_', '-'; at most 128; not starting with '.'
// or '-') or unknown options are ErrInvalid; an existing workspace is
// ErrExist.
func (b *Backend) Create(ctx context.Context, spec opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	const op = "local.Create"
	if b.closed.Load() {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrUnavailable, errors.New("backend closed"))
	}
	if !validID.MatchString(spec.ID) {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("invalid workspace id %q", spec.ID))
	}
	if raw := bytes.TrimSpace(spec.Options); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var o createOptions
		if err := dec.Decode(&o); err != nil {
			return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("options: %w", err))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, opsapi.E(op, spec.ID, nil, err)
	}
	dir := filepath.Join(b.dir, spec.ID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, opsapi.E(op, spec.ID, nil, err)
	}
	ws, err := b.open(spec.ID)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	b.logger.Info("workspace created", "workspace", spec.ID, "root", dir)
	return ws, nil
}

// List finds the workspaces that exist in StateDir, e.g. after a restart,
// so that they can be used or destroyed again. It also removes the
// temporary files of writes a crash interrupted (see
// Workspace.removeStaleTemps), which walks each workspace once.
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
		ws, err := b.open(e.Name())
		if err != nil {
			b.logger.Warn("skipping unreadable workspace", "workspace", e.Name(), "err", err)
			continue
		}
		if n := ws.removeStaleTemps(ctx); n > 0 {
			b.logger.Info("removed interrupted writes' temporary files", "workspace", e.Name(), "count", n)
		}
		out[e.Name()] = ws
	}
	return out, nil
}

// Close stops the backend from creating workspaces; existing workspaces
// and their processes stay.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

func (b *Backend) open(id string) (*Workspace, error) {
	dir := filepath.Join(b.dir, id)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, opsapi.E("local.open", id, nil, err)
	}
	sum := sha256.Sum256([]byte(dir))
	return &Workspace{
		id:     id,
		root:   filepath.ToSlash(dir),
		fsroot: root,
		cfg:    b.cfg,
		logger: b.logger.With("workspace", id),
		// The directory makes the marker unique to this backend
		// instance: two state dirs may both hold a workspace "x".
		marker: "WSBROKER_WORKSPACE=" + id + "@" + hex.EncodeToString(sum[:8]),
		groups: map[int]struct{}{},
	}, nil
}

// Workspace is one local workspace: a directory that every file operation
// is confined to, and where commands run.
type Workspace struct {
	id     string
	root   string   // canonical absolute path of the directory
	fsroot *os.Root // every file access goes through it
	cfg    Config
	logger *slog.Logger
	marker string // KEY=VALUE in every command's environment

	mu        sync.Mutex
	destroyed bool
	groups    map[int]struct{} // process groups that may still have members
}

// ID is the workspace's name.
func (w *Workspace) ID() string { return w.id }

// Root is the absolute host path of the workspace directory.
func (w *Workspace) Root() string { return w.root }

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
	w.mu.Lock()
	if w.destroyed {
		w.mu.Unlock()
		return nil
	}
	w.destroyed = true
	groups := make([]int, 0, len(w.groups))
	for g := range w.groups {
		groups = append(groups, g)
	}
	w.groups = map[int]struct{}{}
	w.mu.Unlock()

	var errs []error
	killed, err := w.killLeftovers(groups)
	if err != nil {
		errs = append(errs, err)
	}
	w.fsroot.Close()
	if err := removeAll(w.root); err != nil {
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

// staleAfter is how long a temporary file must have been left alone before
// it counts as abandoned: a write in progress keeps touching its file.
const staleAfter = time.Minute

// removeStaleTemps deletes WriteFile temporaries that a crash left behind
// (regular files named .<name>.tmp-<16 hex> untouched for staleAfter). The
// walk never follows links and every removal goes through the root.
func (w *Workspace) removeStaleTemps(ctx context.Context) int {
	n := 0
	_ = filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || ctx.Err() != nil {
			return ctx.Err()
		}
		if !d.Type().IsRegular() || !tempPattern.MatchString(d.Name()) {
			return nil
		}
		if fi, err := d.Info(); err != nil || time.Since(fi.ModTime()) < staleAfter {
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
	_ opsapi.Backend         = (*Backend)(nil)
	_ opsapi.Rediscoverer    = (*Backend)(nil)
	_ opsapi.Workspace       = (*Workspace)(nil)
	_ opsapi.Operations      = (*Workspace)(nil)
	_ opsapi.ReadOperations  = (*Workspace)(nil)
	_ opsapi.WriteOperations = (*Workspace)(nil)
	_ opsapi.EditOperations  = (*Workspace)(nil)
	_ opsapi.BashOperations  = (*Workspace)(nil)
	_ opsapi.GrepOperations  = (*Workspace)(nil)
	_ opsapi.FindOperations  = (*Workspace)(nil)
	_ opsapi.LsOperations    = (*Workspace)(nil)
	_ opsapi.Resolver        = (*Workspace)(nil)
	_ opsapi.Destroyer       = (*Workspace)(nil)
)
