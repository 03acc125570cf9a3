package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/wsbroker/wsbroker/internal/loopfs"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agentbin"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// Labels on every container and volume the backend makes.
const (
	LabelManaged   = "wsbroker.managed"    // "1"
	LabelWorkspace = "wsbroker.workspace"  // the workspace ID
	LabelCreatedAt = "wsbroker.created-at" // RFC 3339, UTC
	LabelRoot      = "wsbroker.root"       // the workspace directory
	LabelBroker    = "wsbroker.broker"     // Config.Identity of the broker that made it
	LabelOwner     = "wsbroker.owner"      // the owning tenant (WorkspaceSpec.Owner)
	LabelAgent     = "wsbroker.agent"      // the host directory shared with its agent
)

// namePrefix starts the name of every container and volume.
const namePrefix = "wsbroker-"

// orphanVolumeAge is how old a labelled volume without its container must
// be before List removes it (younger ones may belong to a Create in
// flight).
const orphanVolumeAge = 10 * time.Minute

// Backend creates workspaces as containers of one Docker engine.
type Backend struct {
	cfg           Config
	api           *client.Client
	logger        *slog.Logger
	injectBinary  string // host path of the SFTP server to mount, or ""
	seccompOption string // "seccomp=..." or ""
	agent         agentSetup
	pools         pools
	workspaces    remote.Table[*Workspace] // made or found by this backend
	stopReaper    func()                   // nil without IdleTTL
}

// New checks cfg (zero fields take NewConfig's defaults), connects to the
// engine (negotiating the API version), logs its runc version with a
// warning when it may lack the fix for CVE-2024-21626, finds the SFTP
// server binary to inject, and starts the idle reaper when IdleTTL is
// set. An engine that does not answer is ErrUnavailable.
func New(cfg Config, logger *slog.Logger) (*Backend, error) {
	const op = "docker.New"
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, opsapi.E(op, "", opsapi.ErrInvalid, err)
	}
	logger = remote.BackendLogger(logger, "docker")
	b := &Backend{cfg: cfg, logger: logger}
	if cfg.SFTPServerBinary != "" {
		logger.Warn("sftpServerBinary is deprecated: call it agentBinary", "agentBinary", cfg.AgentBinary)
	}

	if cfg.SFTPServer != SFTPImage {
		bin, err := agentbin.Find(cfg.AgentBinary, remote.AgentName)
		switch {
		case err == nil:
			b.injectBinary = bin
		case cfg.SFTPServer == SFTPInject || cfg.AgentBinary != "":
			return nil, opsapi.E(op, cfg.AgentBinary, opsapi.ErrInvalid, err)
		default:
			logger.Info("no sftp server binary to inject; only images with their own sftp-server can be used", "reason", err)
		}
	}
	switch cfg.SeccompProfile {
	case "":
	case "unconfined":
		logger.Warn("INSECURE: seccompProfile is unconfined; containers run without a seccomp filter")
		b.seccompOption = "seccomp=unconfined"
	default:
		data, err := os.ReadFile(cfg.SeccompProfile)
		if err != nil {
			return nil, opsapi.E(op, cfg.SeccompProfile, opsapi.ErrInvalid, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			return nil, opsapi.E(op, cfg.SeccompProfile, opsapi.ErrInvalid, fmt.Errorf("seccomp profile: %w", err))
		}
		b.seccompOption = "seccomp=" + compact.String()
	}
	b.warnRisks()
	b.setupAgent()
	b.setupDisks()

	api, err := client.NewClientWithOpts(client.WithHost(cfg.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, opsapi.E(op, cfg.Host, opsapi.ErrInvalid, err)
	}
	b.api = api
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ver, err := api.ServerVersion(ctx)
	if err != nil {
		api.Close()
		return nil, opsapi.E(op, cfg.Host, opsapi.ErrUnavailable, err)
	}
	attrs := []any{"engine", ver.Version, "api", api.ClientVersion(), "os", ver.Os, "kernel", ver.KernelVersion}
	if v, commit, ok := runcOf(ver); ok {
		verdict := checkRunc(v, commit)
		attrs = append(attrs, "runc", verdict.Version)
		if verdict.Fixed {
			logger.Info(verdict.Message, "runc", verdict.Version)
		} else {
			logger.Warn(verdict.Message, "runc", verdict.Version)
		}
	} else {
		logger.Warn("the engine does not report its runc version; make sure it carries the fix for CVE-2024-21626 (runc 1.1.12)")
	}
	logger.Info("docker engine", attrs...)

	if err := b.setupPools(); err != nil {
		api.Close()
		return nil, opsapi.E(op, "pools", opsapi.ErrInvalid, err)
	}
	if cfg.IdleTTL > 0 {
		b.stopReaper = remote.Reap(&b.workspaces, cfg.IdleTTL)
	}
	return b, nil
}

// warnRisks logs every configured weakening of the defaults.
func (b *Backend) warnRisks() {
	c := b.cfg
	if c.WritableRootfs {
		b.logger.Warn("writableRootfs: containers' root filesystems are writable")
	}
	if c.AllowNewPrivileges {
		b.logger.Warn("allowNewPrivileges: setuid binaries in images can raise privileges")
	}
	if len(c.CapAdd) > 0 {
		b.logger.Warn("capAdd: capabilities given back to containers", "caps", c.CapAdd)
	}
	if c.Network != DefaultNetwork || len(c.AllowedNetworks) > 0 {
		b.logger.Warn("containers may have a network", "network", c.Network, "allowed", c.AllowedNetworks)
	}
	if u := strings.SplitN(c.User, ":", 2)[0]; u == "0" || u == "root" {
		b.logger.Warn("containers run as root (all capabilities are still dropped)", "user", c.User)
	}
	if slices.Contains(c.AllowedImages, "*") {
		b.logger.Info("any image present on the engine may be used")
	}
}

// sftpServers are the candidate server paths inside a container, in the
// order the channel tries them. The broker's own comes first when it is
// mounted: it writes a small file in one round trip (atomic-write), where
// OpenSSH's needs three.
func (b *Backend) sftpServers() []string {
	var s []string
	if b.cfg.SFTPServer != SFTPImage {
		s = append(s, InjectedSFTPServer)
	}
	if b.cfg.SFTPServer != SFTPInject {
		s = append(s, b.cfg.ImageSFTPServers...)
	}
	return s
}

// Name is the backend's registry name.
func (b *Backend) Name() string { return "docker" }

// validID: a safe container-name component, no leading dot or dash.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// createOptions are the options Create accepts.
type createOptions struct {
	// Image must be DefaultImage or match AllowedImages; empty means
	// DefaultImage.
	Image string `json:"image"`
	// Limits may lower the configured ones, never raise them.
	Limits *createLimits `json:"limits"`
	// Network must be Network or one of AllowedNetworks.
	Network string `json:"network"`
}

// createLimits are a create request's limits.
type createLimits struct {
	Memory ByteSize `json:"memory"`
	CPUs   float64  `json:"cpus"`
	Pids   int64    `json:"pids"`
	Disk   ByteSize `json:"disk"`
}

// spec is a workspace container's settings after options and config.
type spec struct {
	image   string
	memory  ByteSize
	cpus    float64
	pids    int64
	disk    int64 // the volume's own filesystem, 0 for none
	network string
	home    string // the image's HOME, "" when it sets none
	run     string // the host directory shared with the agent, "" for none
}

// resolve checks o against the configuration.
func (b *Backend) resolve(o createOptions) (spec, error) {
	c := b.cfg
	image, err := c.Image(o.Image)
	s := spec{image: image, memory: c.Memory, cpus: c.CPUs, pids: c.Pids, disk: int64(c.Disk), network: c.Network}
	errs := []error{err}
	if l := o.Limits; l != nil {
		errs = append(errs, remote.Lower("limits.memory", l.Memory, minMemory, &s.memory),
			remote.Lower("limits.cpus", l.CPUs, 0.01, &s.cpus), remote.Lower("limits.pids", l.Pids, minPids, &s.pids))
		if l.Disk != 0 {
			if l.Disk < loopfs.MinSize || c.Disk > 0 && l.Disk > c.Disk {
				limit := "no limit"
				if c.Disk > 0 {
					limit = c.Disk.String()
				}
				errs = append(errs, fmt.Errorf("limits.disk %d must be between 8 MiB and %s", l.Disk, limit))
			}
			s.disk = int64(l.Disk)
		}
	}
	if o.Network != "" {
		if o.Network != c.Network && !slices.Contains(c.AllowedNetworks, o.Network) {
			errs = append(errs, fmt.Errorf("network %q is not allowed (allowedNetworks)", o.Network))
		}
		s.network = o.Network
	}
	return s, errors.Join(errs...)
}

// Create makes the workspace's volume and container and starts it. The
// container is hardened as Config describes; its main process only lives,
// under docker-init. Unknown options, an image that is not allowed or not
// present (images are never pulled), limits above the configured ones or
// a network not allowed are ErrInvalid; an existing ID ErrExist; an
// engine that cannot be reached ErrUnavailable.
func (b *Backend) Create(ctx context.Context, ws opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	const op = "docker.Create"
	if !validID.MatchString(ws.ID) {
		return nil, opsapi.E(op, ws.ID, opsapi.ErrInvalid, fmt.Errorf("invalid workspace id %q", ws.ID))
	}
	o, err := decodeCreateOptions(ws.Options)
	if err != nil {
		return nil, opsapi.E(op, ws.ID, opsapi.ErrInvalid, err)
	}
	s, err := b.resolve(o)
	if err != nil {
		return nil, opsapi.E(op, ws.ID, opsapi.ErrInvalid, err)
	}
	if err := b.usable(); err != nil {
		return nil, err
	}
	if p := b.poolFor(s); p != nil {
		if m := b.take(p); m != nil {
			return b.claim(ctx, op, ws, m)
		}
	}
	if err := b.inspectImage(ctx, op, ws.ID, &s); err != nil {
		return nil, err
	}

	name := namePrefix + ws.ID
	created := time.Now().UTC()
	labels := b.labels(ws, b.cfg.WorkspaceDir, created, LabelWorkspace, ws.ID)
	if err := b.checkFree(ctx, op, ws.ID, name); err != nil {
		return nil, err
	}
	if s.run = b.agentRunDir(ws.ID); s.run != "" {
		labels[LabelAgent] = s.run
	}
	var driverOpts map[string]string
	if s.disk > 0 {
		if driverOpts, err = b.makeDisk(ctx, ws.ID, s.disk); err != nil {
			return nil, err
		}
		labels[LabelDisk] = strconv.FormatInt(s.disk, 10)
	}
	cid, err := b.makeContainer(ctx, op, ws.ID, name, s, labels, driverOpts)
	if err != nil {
		return nil, err
	}
	w := b.adopt(ws.ID, cid, ws.Owner, b.cfg.WorkspaceDir, s.run, created)
	w.box.disk = s.disk
	w.Logger().Info("workspace created", "image", s.image, "memory", s.memory, "cpus", s.cpus,
		"pids", s.pids, "network", s.network, "container", cid[:12])
	return w, nil
}

// labels are the labels of what the backend makes for workspace ws (its
// ID and Owner, when set), with root, created and the pairs in more.
func (b *Backend) labels(ws opsapi.WorkspaceSpec, root string, created time.Time, more ...string) map[string]string {
	l := map[string]string{LabelManaged: "1", LabelBroker: b.cfg.Identity, LabelRoot: root, LabelCreatedAt: created.Format(time.RFC3339Nano)}
	if ws.Owner != "" {
		l[LabelOwner] = ws.Owner
	}
	for i := 0; i+1 < len(more); i += 2 {
		l[more[i]] = more[i+1]
	}
	return l
}

// makeContainer makes the volume and the container called name for s
// and starts it, returning the container's ID. Whatever a failure leaves
// is removed (id names the workspace in logs and its filesystem).
func (b *Backend) makeContainer(ctx context.Context, op, id, name string, s spec, labels, driverOpts map[string]string) (string, error) {
	if _, err := b.api.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels, DriverOpts: driverOpts}); err != nil {
		b.removeFailed(id, name)
		return "", engineErr(op, id, err)
	}
	cc, hc := b.containerConfig(s, name, labels)
	resp, err := b.api.ContainerCreate(ctx, cc, hc, nil, nil, name)
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return "", opsapi.E(op, id, opsapi.ErrExist, err)
		}
		b.removeFailed(id, name)
		return "", engineErr(op, id, err)
	}
	for _, warning := range resp.Warnings {
		b.logger.Warn("engine warning at create", "workspace", id, "warning", warning)
	}
	if err := b.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		b.removeFailed(id, name)
		return "", engineErr(op, id, err)
	}
	return resp.ID, nil
}

// decodeCreateOptions reads a create request's options strictly
// (remote.DecodeOptions).
func decodeCreateOptions(options json.RawMessage) (createOptions, error) {
	var o createOptions
	return o, remote.DecodeOptions(options, &o)
}

// inspectImage checks that s's image is on the engine (images are never
// pulled) and learns its home directory.
func (b *Backend) inspectImage(ctx context.Context, op, id string, s *spec) error {
	img, err := b.api.ImageInspect(ctx, s.image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return opsapi.E(op, s.image, opsapi.ErrInvalid, fmt.Errorf("image %q is not present on the engine (images are never pulled)", s.image))
		}
		return engineErr(op, id, err)
	}
	if img.Config != nil {
		s.home = homeOf(img.Config.Env)
	}
	return nil
}

// checkFree fails with ErrExist when a container or volume already has
// the workspace's name. VolumeCreate would hand back an existing volume
// as it is: never give a new workspace the files of an old one.
func (b *Backend) checkFree(ctx context.Context, op, id, name string) error {
	if _, err := b.api.ContainerInspect(ctx, name); err == nil {
		return opsapi.E(op, id, opsapi.ErrExist, errors.New("workspace exists"))
	} else if !cerrdefs.IsNotFound(err) {
		return engineErr(op, id, err)
	}
	if _, err := b.api.VolumeInspect(ctx, name); err == nil {
		return opsapi.E(op, id, opsapi.ErrExist, fmt.Errorf("volume %s exists (left by an earlier workspace)", name))
	} else if !cerrdefs.IsNotFound(err) {
		return engineErr(op, id, err)
	}
	return nil
}

// removeFailed removes what a failed create left. It runs even when ctx
// is what failed.
func (b *Backend) removeFailed(id, name string) {
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.api.ContainerRemove(cctx, name, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
		b.logger.Warn("cleanup after a failed create", "workspace", id, "err", err)
	}
	if err := b.api.VolumeRemove(cctx, name, true); err != nil && !cerrdefs.IsNotFound(err) {
		b.logger.Warn("cleanup after a failed create", "workspace", id, "err", err)
	}
	if err := b.removeDisk(cctx, id); err != nil {
		b.logger.Warn("cleanup after a failed create", "workspace", id, "err", err)
	}
}

// containerConfig is the hardened container for s.
func (b *Backend) containerConfig(s spec, name string, labels map[string]string) (*container.Config, *container.HostConfig) {
	c := b.cfg
	cc := &container.Config{
		Image:      s.image,
		User:       c.User,
		Cmd:        c.Command,
		Entrypoint: []string{},
		WorkingDir: c.WorkspaceDir,
		Labels:     labels,
		Hostname:   "workspace",
	}
	pids := s.pids
	secOpt := []string{}
	if !c.AllowNewPrivileges {
		secOpt = append(secOpt, "no-new-privileges:true")
	}
	if b.seccompOption != "" {
		secOpt = append(secOpt, b.seccompOption)
	}
	mounts := []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: c.WorkspaceDir}}
	if b.injectBinary != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.injectBinary, Target: InjectedSFTPServer, ReadOnly: true})
	}
	if s.run != "" {
		// Read-only: the agent connects to the broker's socket there and
		// writes nothing; a command must not either (see agentRunDir).
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: s.run, Target: AgentRunDir, ReadOnly: true})
	}
	init := true
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.network),
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		LogConfig:      container.LogConfig{Type: "none"},
		CapDrop:        []string{"ALL"},
		CapAdd:         c.CapAdd,
		SecurityOpt:    secOpt,
		ReadonlyRootfs: !c.WritableRootfs,
		IpcMode:        container.IPCModePrivate,
		Init:           &init,
		Tmpfs:          b.tmpfs(s.home),
		Mounts:         mounts,
		Resources: container.Resources{
			Memory:     int64(s.memory),
			MemorySwap: int64(s.memory), // no swap
			NanoCPUs:   int64(s.cpus * 1e9),
			PidsLimit:  &pids,
		},
	}
	return cc, hc
}

// tmpfs is the container's tmpfs mounts: /tmp, and home when the root
// filesystem is read-only (else HOME would be unwritable) and home is a
// directory of its own.
func (b *Backend) tmpfs(home string) map[string]string {
	size := int64(b.cfg.TmpfsSize)
	m := map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", size)}
	if b.cfg.WritableRootfs || home == "" || home == "/tmp" || opsapi.Within(home, b.cfg.WorkspaceDir) || opsapi.Within(b.cfg.WorkspaceDir, home) {
		return m
	}
	opts := fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=0755", size)
	if uid, gid, ok := strings.Cut(b.cfg.User, ":"); ok && isNumber(uid) && isNumber(gid) {
		opts += ",uid=" + uid + ",gid=" + gid
	} else if isNumber(b.cfg.User) {
		opts += ",uid=" + b.cfg.User
	} else {
		opts = fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", size)
	}
	m[home] = opts
	return m
}

// homeOf is HOME from an image's environment, when it is a clean absolute
// path other than / and outside /proc, /sys and /dev.
func homeOf(env []string) string {
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			if !path.IsAbs(h) || path.Clean(h) != h || h == "/" || underProc(h) ||
				opsapi.Within("/sys", h) || opsapi.Within("/dev", h) {
				return ""
			}
			return h
		}
	}
	return ""
}

// underProc reports whether the absolute path p is /proc or below it.
func underProc(p string) bool { return opsapi.Within("/proc", path.Clean(p)) }

func isNumber(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// adopt returns the backend's Workspace for id, making it when new (its
// agent's run directory agentDir, "" for none).
func (b *Backend) adopt(id, cid, owner, root, agentDir string, created time.Time) *Workspace {
	return b.workspaces.Adopt(id, func(w *Workspace) bool { return w.box.cid == cid }, func() *Workspace {
		w := b.newWorkspace(id, cid, root, agentDir, created)
		w.owner = owner
		return w
	})
}

func (b *Backend) usable() error { return b.workspaces.Usable("docker") }

// List finds the workspace containers this broker made (its Identity
// label) after a restart, starting those that are stopped. Volumes left by
// a create that never finished are removed once they are old enough.
// Another broker's workspaces on the same engine are left alone.
func (b *Backend) List(ctx context.Context) (map[string]opsapi.Workspace, error) {
	const op = "docker.List"
	if err := b.usable(); err != nil {
		return nil, err
	}
	b.noteOthers(ctx)
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"), filters.Arg("label", LabelBroker+"="+b.cfg.Identity))
	list, err := b.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineErr(op, "", err)
	}
	out := map[string]opsapi.Workspace{}
	members := map[string]bool{} // pool members' names, claimed or not
	for _, c := range list {
		id, owner, createdAt := c.Labels[LabelWorkspace], c.Labels[LabelOwner], c.Labels[LabelCreatedAt]
		agentKey, volumes := id, []string(nil)
		if member := c.Labels[LabelMember]; member != "" {
			members[member] = true
			cl, ok := b.claimOf(ctx, c)
			if !ok {
				continue // a ready member: its pool takes it back
			}
			id, owner, createdAt = cl.Labels[LabelWorkspace], cl.Labels[LabelOwner], cl.Labels[LabelCreatedAt]
			agentKey, volumes = member, []string{member, cl.Name}
		}
		if !validID.MatchString(id) || !slices.Contains(c.Names, "/"+namePrefix+id) {
			continue
		}
		disk := diskOfLabels(c.Labels)
		if !b.wake(ctx, c, id, disk) {
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, createdAt)
		if err != nil {
			created = time.Unix(c.Created, 0)
		}
		// The root the workspace was made with, whatever the
		// configuration says now.
		root := c.Labels[LabelRoot]
		if !path.IsAbs(root) || underProc(root) {
			root = b.cfg.WorkspaceDir
		}
		dir := c.Labels[LabelAgent]
		if !b.agent.on || dir != b.agentDirOf(agentKey) {
			dir = ""
		}
		w := b.adopt(id, c.ID, owner, path.Clean(root), dir, created)
		w.box.disk = disk
		w.box.volumes = volumes
		out[id] = w
	}
	return out, b.removeOrphanVolumes(ctx, f, out, members)
}

// wake readies rediscovered container c of workspace id: its filesystem
// of disk bytes mounted (false when it cannot be), the container running.
func (b *Backend) wake(ctx context.Context, c container.Summary, id string, disk int64) bool {
	if disk > 0 {
		// After a reboot the filesystem is not mounted, and the engine
		// may already have started the container on the empty directory
		// beneath: mount it, then restart the container so its volume
		// binds the filesystem.
		mounted, err := b.mountDisk(ctx, id)
		if err != nil {
			b.logger.Warn("rediscovered workspace's filesystem could not be mounted; skipping it", "workspace", id, "err", err)
			return false
		}
		if mounted && c.State == "running" {
			if err := b.api.ContainerRestart(ctx, c.ID, container.StopOptions{}); err != nil {
				b.logger.Warn("rediscovered workspace could not be restarted on its filesystem", "workspace", id, "err", err)
			}
		}
	}
	if c.State != "running" {
		if err := b.api.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			b.logger.Warn("rediscovered workspace could not be started", "workspace", id, "state", c.State, "err", err)
		}
	}
	return true
}

// removeOrphanVolumes removes the volumes of filter f whose workspace (in
// found) or pool member (in members) has no container, once they are old
// enough: a create that never finished left them.
func (b *Backend) removeOrphanVolumes(ctx context.Context, f filters.Args, found map[string]opsapi.Workspace, members map[string]bool) error {
	vols, err := b.api.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return engineErr("docker.List", "", err)
	}
	for _, v := range vols.Volumes {
		id := v.Labels[LabelWorkspace]
		switch member := v.Labels[LabelMember]; {
		case member != "":
			if members[member] || v.Name != member {
				continue
			}
		case found[id] != nil || v.Name != namePrefix+id:
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, v.Labels[LabelCreatedAt])
		if err != nil || time.Since(created) < orphanVolumeAge {
			continue
		}
		if err := b.api.VolumeRemove(ctx, v.Name, false); err != nil {
			b.logger.Warn("orphan volume not removed", "volume", v.Name, "err", err)
		} else {
			b.logger.Info("removed the volume of a workspace whose container is gone", "volume", v.Name)
			if id == "" {
				continue // a pool member's: it never has a filesystem of its own
			}
			if err := b.removeDisk(ctx, id); err != nil {
				b.logger.Warn("orphan volume's filesystem not removed", "volume", v.Name, "err", err)
			}
		}
	}
	return nil
}

// noteOthers logs how many workspace containers on the engine belong to
// other brokers (or predate identities), which List leaves alone.
func (b *Backend) noteOthers(ctx context.Context) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=1"))
	all, err := b.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return
	}
	n := 0
	for _, c := range all {
		if c.Labels[LabelBroker] != b.cfg.Identity {
			n++
		}
	}
	if n > 0 {
		b.logger.Info("workspace containers of other brokers (or from before broker identities) are left alone",
			"count", n, "identity", b.cfg.Identity)
	}
}

// Close stops the reaper and closes every SFTP channel and the engine
// client. Workspaces (containers, volumes, processes) stay.
func (b *Backend) Close() error {
	ws, ok := b.workspaces.Close()
	if !ok {
		return nil
	}
	if b.stopReaper != nil {
		b.stopReaper()
	}
	b.pools.set.Close() // every ready member removed: it would run unused until the next start
	for _, w := range ws {
		w.box.Channel.Close()
	}
	return b.api.Close()
}

// engineErr classifies an error of the engine API.
func engineErr(op, p string, err error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		kind = nil // Classify gives ErrTimeout or ErrCanceled
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err):
		kind = opsapi.ErrUnavailable
	case cerrdefs.IsNotFound(err):
		kind = opsapi.ErrNotExist
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		kind = opsapi.ErrExist
	case cerrdefs.IsInvalidArgument(err):
		kind = opsapi.ErrInvalid
	case cerrdefs.IsPermissionDenied(err), cerrdefs.IsUnauthorized(err):
		kind = opsapi.ErrPermission
	default:
		kind = opsapi.ErrUnavailable
	}
	return opsapi.E(op, p, kind, err)
}

// isNotRunning reports the engine's refusal to exec in a stopped
// container.
func isNotRunning(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is not running")
}

// remoteexecConfig is the runner configuration of every workspace.
func (b *Backend) remoteexecConfig() remoteexec.Config {
	return remoteexec.Config{
		Shell:     b.cfg.Shell,
		KillGrace: b.cfg.KillGrace,
		DrainIdle: b.cfg.DrainIdle,
		MaxDrain:  b.cfg.MaxDrain,
		Op:        "docker.Exec",
	}
}

// Every tool the docker backend serves (alphabetically), then realpath,
// Destroy, rediscovery and what a workspace reports.
var (
	_ opsapi.Backend           = (*Backend)(nil)
	_ opsapi.Rediscoverer      = (*Backend)(nil)
	_ opsapi.Workspace         = (*Workspace)(nil)
	_ opsapi.BashOperations    = (*Workspace)(nil)
	_ opsapi.EditOperations    = (*Workspace)(nil)
	_ opsapi.FindOperations    = (*Workspace)(nil)
	_ opsapi.GrepOperations    = (*Workspace)(nil)
	_ opsapi.LsOperations      = (*Workspace)(nil)
	_ opsapi.ReadOperations    = (*Workspace)(nil)
	_ opsapi.WriteOperations   = (*Workspace)(nil)
	_ opsapi.Operations        = (*Workspace)(nil)
	_ opsapi.TreeOperations    = (*Workspace)(nil)
	_ opsapi.Resolver          = (*Workspace)(nil)
	_ opsapi.Destroyer         = (*Workspace)(nil)
	_ opsapi.TransportReporter = (*Workspace)(nil)
	_ opsapi.GoneReporter      = (*Workspace)(nil)
	_ opsapi.OwnerReporter     = (*Workspace)(nil)
	_ opsapi.CreationTimer     = (*Workspace)(nil)
)
