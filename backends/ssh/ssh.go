package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Backend creates workspaces as directories on SSH hosts.
type Backend struct {
	cfg      Config
	logger   *slog.Logger
	hostKeys ssh.HostKeyCallback
	signers  []ssh.Signer
	agent    *agentBinary // the in-box agent to upload, nil for none

	mu     sync.Mutex
	hosts  map[string]*host // by user@address
	closed bool
}

// New checks cfg (zero fields take NewConfig's defaults), reads the
// known_hosts and key files, and returns the backend. It connects to
// nothing until a workspace is created.
func New(cfg Config, logger *slog.Logger) (*Backend, error) {
	const op = "ssh.New"
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, opsapi.E(op, "", opsapi.ErrInvalid, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{cfg: cfg, logger: logger.With("backend", "ssh"), hosts: map[string]*host{}}
	if cfg.InboxAgentBinary != "" {
		b.logger.Warn("the ssh key inboxAgentBinary is deprecated: call it agentBinary", "path", cfg.InboxAgentBinary)
		b.cfg.AgentBinary = cfg.InboxAgentBinary
	}
	if cfg.InsecureIgnoreHostKey {
		b.logger.Warn("INSECURE: insecureIgnoreHostKey is set; SSH host keys are NOT verified and any machine on the path can impersonate a workspace host")
		b.hostKeys = ssh.InsecureIgnoreHostKey()
	} else {
		cb, err := knownhosts.New(cfg.KnownHostsFiles...)
		if err != nil {
			return nil, opsapi.E(op, strings.Join(cfg.KnownHostsFiles, ","), opsapi.ErrInvalid, fmt.Errorf("known_hosts: %w", err))
		}
		b.hostKeys = cb
	}
	for _, f := range cfg.IdentityFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, opsapi.E(op, f, opsapi.ErrInvalid, err)
		}
		s, err := ssh.ParsePrivateKey(data)
		if err != nil {
			return nil, opsapi.E(op, f, opsapi.ErrInvalid, fmt.Errorf("identity file: %w", err))
		}
		b.signers = append(b.signers, s)
	}
	if err := b.findAgent(); err != nil {
		return nil, opsapi.E(op, b.cfg.AgentBinary, opsapi.ErrInvalid, err)
	}
	return b, nil
}

// Name is the backend's registry name.
func (b *Backend) Name() string { return "ssh" }

// validID: a safe single path component, no leading dot or dash.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// createOptions are the options Create accepts.
type createOptions struct {
	// Host is a configured host's name, or "host:port" when
	// AllowUnlistedHosts.
	Host string `json:"host"`
	// User must be the configured host's user (or empty); for an
	// unlisted host it is required.
	User string `json:"user"`
	// Root is the workspace directory, absolute. Created when missing
	// (and then removed by Destroy); an existing directory is used as it
	// is and kept by Destroy. Empty means WorkspaceDir/<id>.
	Root string `json:"root"`
}

// Create connects to the host (or reuses its connection) and makes the
// workspace directory. Unknown options, a host not configured (unless
// AllowUnlistedHosts), another user, or a relative root are ErrInvalid; a
// host that cannot be reached is ErrUnavailable; a host key that does not
// verify ErrPermission. A root that is a file is ErrNotDir.
func (b *Backend) Create(ctx context.Context, spec opsapi.WorkspaceSpec) (opsapi.Workspace, error) {
	const op = "ssh.Create"
	if !validID.MatchString(spec.ID) {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("invalid workspace id %q", spec.ID))
	}
	var o createOptions
	if raw := bytes.TrimSpace(spec.Options); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, fmt.Errorf("options: %w", err))
		}
	}
	addr, user, wsDir, err := b.target(o)
	if err != nil {
		return nil, opsapi.E(op, spec.ID, opsapi.ErrInvalid, err)
	}
	if o.Root != "" && (!path.IsAbs(o.Root) || strings.IndexByte(o.Root, 0) >= 0) {
		return nil, opsapi.E(op, o.Root, opsapi.ErrInvalid, errors.New("root must be an absolute path"))
	}
	h, err := b.host(addr, user)
	if err != nil {
		return nil, opsapi.E(op, spec.ID, nil, err)
	}
	c, err := h.get(ctx)
	if err != nil {
		return nil, err
	}

	root := path.Clean(o.Root)
	if o.Root == "" {
		root = opsapi.Resolve(opsapi.Resolve(c.home, wsDir), spec.ID)
	}
	owned := false
	probe := sftpops.New(h.sftpClient, "/", sftpops.Options{Op: "ssh"})
	fi, err := probe.Stat(ctx, root)
	switch {
	case err == nil && !fi.IsDir():
		return nil, opsapi.E(op, root, opsapi.ErrNotDir, errors.New("workspace root is not a directory"))
	case errors.Is(err, opsapi.ErrNotExist):
		if err := probe.Mkdir(ctx, root); err != nil {
			return nil, err
		}
		owned = true
	case err != nil:
		return nil, err
	}
	// The canonical root is what `pwd -P` shows in a command.
	if real, err := probe.RealPath(ctx, root); err == nil {
		root = real
	}
	sum := sha256.Sum256([]byte(addr + "\x00" + user + "\x00" + root))
	w := &Workspace{
		id:     spec.ID,
		root:   root,
		owned:  owned,
		host:   h,
		marker: workspaceKey + "=" + spec.ID + "@" + hex.EncodeToString(sum[:8]),
		logger: h.log.With("workspace", spec.ID),
	}
	w.fs = sftpops.New(h.sftpClient, root, sftpops.Options{Identity: &c.id, Logger: w.logger, Op: "ssh"})
	w.logger.Info("workspace created", "root", root, "created", owned)
	return w, nil
}

// target picks the address, user and workspace directory for o.
func (b *Backend) target(o createOptions) (addr, user, wsDir string, err error) {
	if o.Host == "" {
		return "", "", "", errors.New(`"host" is required`)
	}
	if h, ok := b.cfg.Hosts[o.Host]; ok {
		if o.User != "" && o.User != h.User {
			return "", "", "", fmt.Errorf("host %q allows only user %q", o.Host, h.User)
		}
		addr, _ = normalizeAddr(h.Address)
		wsDir = h.WorkspaceDir
		if wsDir == "" {
			wsDir = DefaultWorkspaceDir
		}
		return addr, h.User, wsDir, nil
	}
	if !b.cfg.AllowUnlistedHosts {
		return "", "", "", fmt.Errorf("host %q is not configured (and allowUnlistedHosts is off)", o.Host)
	}
	if addr, err = normalizeAddr(o.Host); err != nil {
		return "", "", "", err
	}
	if o.User == "" {
		return "", "", "", errors.New(`"user" is required for a host that is not configured`)
	}
	return addr, o.User, DefaultWorkspaceDir, nil
}

// host returns the shared connection holder for user@addr.
func (b *Backend) host(addr, user string) (*host, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, opsapi.E("ssh", addr, opsapi.ErrUnavailable, errors.New("backend closed"))
	}
	key := user + "@" + addr
	h, ok := b.hosts[key]
	if !ok {
		h = newHost(b, addr, user)
		b.hosts[key] = h
	}
	return h, nil
}

// Close closes every connection. Workspaces, their files and processes
// stay on the hosts.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	hosts := b.hosts
	b.hosts = map[string]*host{}
	b.mu.Unlock()
	for _, h := range hosts {
		h.close()
	}
	return nil
}

// workspaceKey marks every process of a workspace.
const workspaceKey = "WSBROKER_WORKSPACE"

// Workspace is a directory on an SSH host: files over SFTP, commands in
// sessions under the remoteexec wrapper.
type Workspace struct {
	id     string
	root   string
	owned  bool // Create made the directory; Destroy removes it
	host   *host
	fs     *sftpops.FS
	marker string
	logger *slog.Logger

	destroyed atomic.Bool
}

// ID is the workspace's name.
func (w *Workspace) ID() string { return w.id }

// Root is the canonical absolute path of the workspace on its host.
func (w *Workspace) Root() string { return w.root }

// Destroy kills every process carrying the workspace's marker and, when
// Create made the directory, removes it. Destroying twice is not an error.
func (w *Workspace) Destroy(ctx context.Context) error {
	if w.destroyed.Swap(true) {
		return nil
	}
	killed, err := w.host.runner.KillMarked(ctx, w.marker)
	errs := []error{err}
	if w.owned {
		_, rerr := w.host.run(ctx, []string{"rm", "-rf", "--", w.root})
		errs = append(errs, rerr)
	}
	err = errors.Join(errs...)
	w.logger.Info("workspace destroyed", "killed", killed, "removed", w.owned, "err", err)
	if err != nil {
		return opsapi.E("ssh.Destroy", w.id, nil, err)
	}
	return nil
}

func (w *Workspace) gone(op, p string) error {
	if w.destroyed.Load() {
		return opsapi.E(op, p, opsapi.ErrNotExist, errors.New("workspace destroyed"))
	}
	return nil
}
