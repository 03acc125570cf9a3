package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"github.com/wsbroker/wsbroker/opsapi"
)

// sandboxer confines a backend's commands (a sandbox.Spawner per
// workspace) and gives each workspace its own uid.
type sandboxer struct {
	cfg      SandboxConfig
	stateDir string              // hidden from commands
	eff      sandbox.Confinement // what the start probe measured
	mu       sync.Mutex          // serialises uid allocation
}

// openSandbox decides whether commands are sandboxed, measures what holds
// on this host with one probe spawner, and logs every layer that does not.
func (b *Backend) openSandbox() error {
	cfg := b.cfg.Sandbox
	if cfg.Mode == "off" {
		b.logger.Warn("sandbox off (local.sandbox.mode): commands run as the broker's user, unconfined; set auto or on to confine them")
		return nil
	}
	sb, err := b.probeSandbox()
	if err != nil {
		if cfg.Mode == "on" {
			return fmt.Errorf("sandbox: %w", err)
		}
		b.logger.Warn("sandbox unavailable: commands run as the broker's user, unconfined", "err", err)
		return nil
	}
	b.sb = sb
	e := sb.eff
	b.logger.Info("sandbox in use", "confinement", e, "uids", fmt.Sprintf("%d+%d", cfg.UIDBase, cfg.UIDCount))
	if e.LandlockABI == 0 {
		b.logger.Warn("sandbox: Landlock unavailable (kernel without it, or disabled): reads are bounded by uid and mounts only")
	}
	if !e.PIDNamespace {
		b.logger.Info("sandbox: no pid namespace: commands see every process; the uid keeps them from signalling or tracing any but their own workspace's")
	}
	return nil
}

// probeSandbox confines a spawner once, for a scratch workspace of the
// state directory, to learn what holds on this host.
func (b *Backend) probeSandbox() (*sandboxer, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("only on Linux")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the broker is not root: it cannot give commands another user")
	}
	sb := &sandboxer{cfg: b.cfg.Sandbox, stateDir: b.cfg.StateDir}
	dir, err := os.MkdirTemp(b.cfg.StateDir, "sandbox-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	uid := sb.cfg.UIDBase + sb.cfg.UIDCount - 1
	sp, err := sandbox.NewSpawner(sb.spec(dir, dir, uid))
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	sb.eff = sp.Confinement()
	sp.Close()
	return sb, nil
}

// spec is the confinement of a command of the workspace at root.
func (sb *sandboxer) spec(root, tmp string, uid int) sandbox.Spec {
	return sandbox.Spec{
		UID:       uid,
		GID:       uid,
		Workspace: root,
		Hide:      []string{sb.stateDir},
		Tmp:       tmp,
		Network:   sb.cfg.Network,
		ReadPaths: sb.cfg.ReadPaths,
		Seccomp:   true,
	}
}

// confinement is what holds for the commands of a workspace given uid
// (-1 unsandboxed) on this host, as the start probe measured it.
func (b *Backend) confinement(uid int) opsapi.Confinement {
	c := opsapi.Confinement{Network: sandbox.NetworkHost, Cgroup: b.cg != nil}
	if b.sb == nil {
		return c
	}
	e := b.sb.eff
	c.Sandboxed = true
	c.User, c.NoNewPrivs, c.PrivateTmp = e.User, e.NoNewPrivs, e.Mounts
	if e.User && uid > 0 {
		c.UID = uid
	}
	c.Network, c.LandlockABI, c.Seccomp, c.PIDNamespace = e.Network, e.LandlockABI, e.Seccomp, e.PIDNamespace
	return c
}

// layersHeld names each layer of c as sandbox.require does, with whether
// it holds.
func layersHeld(c opsapi.Confinement) map[string]bool {
	return map[string]bool{
		"user": c.User, "noNewPrivs": c.NoNewPrivs, "privateTmp": c.PrivateTmp, "mounts": c.PrivateTmp,
		"network": c.Network == sandbox.NetworkNone, "landlock": c.LandlockABI > 0, "seccomp": c.Seccomp,
		"pidNamespace": c.PIDNamespace, "cgroup": c.Cgroup,
	}
}

// missing lists the layers of names that do not hold on this host.
func (b *Backend) missing(names []string) []string {
	held := layersHeld(b.confinement(-1))
	var out []string
	for _, r := range names {
		if !held[r] {
			out = append(out, r)
		}
	}
	return out
}

// tmpDir is the host directory mounted on the workspace's /tmp: on the
// workspace's own filesystem when it has one (so /tmp fills its size, not
// the state directory's), else in the state directory.
func (b *Backend) tmpDir(id string) string {
	if fi, err := os.Stat(b.diskFS(id)); err == nil && fi.IsDir() {
		return filepath.Join(b.diskFS(id), diskTmp)
	}
	return filepath.Join(b.cfg.StateDir, "tmp", id)
}

// claimUID gives the workspace directory dir (and its private /tmp) a uid
// of the range no other workspace has: the one it already has, or the
// lowest free one, its tree chowned to it (a workspace made before the
// sandbox was on).
func (b *Backend) claimUID(id string) (int, error) {
	sb := b.sb
	sb.mu.Lock()
	defer sb.mu.Unlock()
	dir := filepath.Join(b.dir, id)
	if uid := ownerOf(dir); sb.inRange(uid) {
		return uid, b.ensureTmp(id, uid)
	}
	used := map[int]bool{}
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return -1, err
	}
	for _, e := range entries {
		used[ownerOf(filepath.Join(b.dir, e.Name()))] = true
	}
	for uid := sb.cfg.UIDBase; uid < sb.cfg.UIDBase+sb.cfg.UIDCount; uid++ {
		if used[uid] {
			continue
		}
		if err := chownTree(dir, uid); err != nil {
			return -1, err
		}
		return uid, b.ensureTmp(id, uid)
	}
	return -1, fmt.Errorf("sandbox: all %d uids from %d are taken", sb.cfg.UIDCount, sb.cfg.UIDBase)
}

func (sb *sandboxer) inRange(uid int) bool {
	return uid >= sb.cfg.UIDBase && uid < sb.cfg.UIDBase+sb.cfg.UIDCount
}

// ensureTmp makes the workspace's private /tmp, owned by uid.
func (b *Backend) ensureTmp(id string, uid int) error {
	if err := os.MkdirAll(filepath.Dir(b.tmpDir(id)), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(b.tmpDir(id), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Lchown(b.tmpDir(id), uid, uid)
}

// ownerOf is the uid owning p, -1 when unknown.
func ownerOf(p string) int {
	fi, err := os.Lstat(p)
	if err != nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// chownTree gives dir and everything in it to uid (and the equal gid),
// links themselves, never their targets.
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}
