package ssh

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
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// Backend creates workspaces as directories on SSH hosts.
type Backend struct {
	cfg      Config
	logger   *slog.Logger
	hostKeys ssh.HostKeyCallback
	signers  []ssh.Signer
	agent    *remote.AgentBinary // the in-box agent to upload, nil for none
	noAgent  string              // why agent is nil

	mu     sync.Mutex
	hosts  map[string]*host // by user@address
	closed bool
}

// New checks cfg (zero fields take NewConfig's defaults), reads the
// known_hosts and key files, and returns the backend. It connects to
// nothing until a workspace is created.
func New(cfg Config, logger *slog.Logger) (*Backend, error) {
	const op = "ssh.New"
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{cfg: cfg.withDefaults(), logger: logger.With("backend", "ssh"), hosts: map[string]*host{}}
	if err := b.cfg.Validate(); err != nil {
		return nil, opsapi.E(op, "", opsapi.ErrInvalid, err)
	}
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

// findAgent locates the in-box agent's binary when the configuration
// wants one; a configured one that is unusable is an error, a missing
// default one turns the agent off.
func (b *Backend) findAgent() error {
	if b.cfg.InboxAgent == InboxAgentOff {
		b.noAgent = "inboxAgent: off in the configuration"
		return nil
	}
	bin, err := remote.FindAgent(b.cfg.AgentBinary)
	if err == nil {
		b.agent = &bin
		return nil
	}
	if b.cfg.AgentBinary != "" {
		return err
	}
	b.noAgent = "no agent binary for this host"
	b.logger.Info("no in-box agent binary; commands run in a session each", "reason", err)
	return nil
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
	probe := sftpops.New(h.SFTP, "/", sftpops.Options{Op: "ssh"})
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
	w := b.newWorkspace(h, spec.ID, root, owned)
	w.Logger().Info("workspace created", "root", root, "created", owned)
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
