package ssh

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/internal/execconf"
)

// Config configures the ssh backend. Zero fields take the defaults of
// NewConfig when the backend is built.
type Config struct {
	// KnownHostsFiles are OpenSSH known_hosts files; every host key is
	// verified against them. Required unless InsecureIgnoreHostKey.
	KnownHostsFiles []string `json:"knownHostsFiles" yaml:"knownHostsFiles"`
	// InsecureIgnoreHostKey accepts any host key: anyone on the path can
	// then impersonate the host. For throwaway labs only; logged loudly
	// at start and at every connection.
	InsecureIgnoreHostKey bool `json:"insecureIgnoreHostKey" yaml:"insecureIgnoreHostKey"`
	// IdentityFiles are private keys (OpenSSH or PEM, unencrypted) to log
	// in with.
	IdentityFiles []string `json:"identityFiles" yaml:"identityFiles"`
	// Agent also offers the keys of an ssh-agent, at AgentSocket or, when
	// that is empty, $SSH_AUTH_SOCK.
	Agent       bool   `json:"agent" yaml:"agent"`
	AgentSocket string `json:"agentSocket" yaml:"agentSocket"`
	// Hosts are the machines workspaces may be created on, by name.
	Hosts map[string]Host `json:"hosts" yaml:"hosts"`
	// AllowUnlistedHosts lets a create request name any "host:port" (and
	// user) instead of a configured host. Off by default: a tenant could
	// otherwise make the broker log in anywhere its keys open. Host keys
	// are verified all the same.
	AllowUnlistedHosts bool `json:"allowUnlistedHosts" yaml:"allowUnlistedHosts"`
	// DialTimeout bounds connecting and the SSH handshake. Default 10s.
	DialTimeout time.Duration `json:"dialTimeout" yaml:"dialTimeout"`
	// KeepaliveInterval is how often an idle connection is probed;
	// after KeepaliveCountMax unanswered intervals it is closed, so calls
	// on a dead network fail instead of hanging. Defaults 15s and 3.
	KeepaliveInterval time.Duration `json:"keepaliveInterval" yaml:"keepaliveInterval"`
	KeepaliveCountMax int           `json:"keepaliveCountMax" yaml:"keepaliveCountMax"`
	// MaxSessions is the server's limit of sessions per connection
	// (OpenSSH's MaxSessions, default 10). One is the SFTP channel, two
	// are kept for kills, the rest run commands and searches; more wait.
	MaxSessions int `json:"maxSessions" yaml:"maxSessions"`
	// InboxAgent chooses how commands reach a host: "auto" (default)
	// through the in-box agent (package agent; the broker's static
	// wsb-agent binary, uploaded by content hash into
	// ~/.cache/wsbroker on hosts of the broker's architecture) on one
	// session kept open, else, or with "off", a session per command under
	// the remoteexec wrapper. Files stay on the connection's own SFTP.
	// (Not "agent" as in docker's configuration: here that key offers an
	// ssh-agent's keys.)
	InboxAgent string `json:"inboxAgent" yaml:"inboxAgent"`
	// AgentBinary is that in-box agent binary (cmd/wsb-agent), as for
	// the docker and kubernetes backends. Empty: wsb-agent beside the
	// broker's executable, then on PATH.
	AgentBinary string `json:"agentBinary" yaml:"agentBinary"`
	// Deprecated: InboxAgentBinary is AgentBinary's old name, still read
	// (New logs a warning); setting both to different paths is invalid.
	InboxAgentBinary string `json:"inboxAgentBinary,omitempty" yaml:"inboxAgentBinary,omitempty"`
	// Exec holds killGrace, drainIdle, maxDrain, shell and rgPath, all
	// on the host; see package execconf.
	execconf.Exec `yaml:",inline"`
}

// Host is one machine workspaces can live on.
type Host struct {
	// Address is "host:port" (port 22 when omitted).
	Address string `json:"address" yaml:"address"`
	// User is the account to log in as. A create request may name only
	// this user.
	User string `json:"user" yaml:"user"`
	// WorkspaceDir is the directory on the host under which workspaces
	// without an explicit root are created, as WorkspaceDir/<id>;
	// relative to the account's home. Default ".wsbroker/workspaces".
	WorkspaceDir string `json:"workspaceDir" yaml:"workspaceDir"`
}

// Defaults.
const (
	DefaultDialTimeout       = 10 * time.Second
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveCountMax = 3
	DefaultMaxSessions       = 10
	DefaultWorkspaceDir      = ".wsbroker/workspaces"
)

// In-box agent modes.
const (
	InboxAgentAuto = "auto"
	InboxAgentOff  = "off"
)

// NewConfig returns a configuration with every default set, no hosts and
// no keys.
func NewConfig() Config {
	return Config{
		DialTimeout:       DefaultDialTimeout,
		KeepaliveInterval: DefaultKeepaliveInterval,
		KeepaliveCountMax: DefaultKeepaliveCountMax,
		MaxSessions:       DefaultMaxSessions,
		InboxAgent:        InboxAgentAuto,
		Exec:              execconf.New(),
	}
}

// withDefaults fills the zero fields from NewConfig (the command
// settings from package execconf).
func (c Config) withDefaults() Config {
	d := NewConfig()
	orDefault(&c.DialTimeout, d.DialTimeout)
	orDefault(&c.KeepaliveInterval, d.KeepaliveInterval)
	orDefault(&c.KeepaliveCountMax, d.KeepaliveCountMax)
	orDefault(&c.MaxSessions, d.MaxSessions)
	orDefault(&c.InboxAgent, d.InboxAgent)
	c.Exec = c.Exec.WithDefaults()
	return c
}

// orDefault sets *v to d when it is the zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Validate reports every problem with c at once. It checks values only;
// New reads the files.
func (c Config) Validate() error {
	var errs []error
	if len(c.KnownHostsFiles) == 0 && !c.InsecureIgnoreHostKey {
		errs = append(errs, errors.New("knownHostsFiles is required (host keys are always verified)"))
	}
	if len(c.IdentityFiles) == 0 && !c.Agent {
		errs = append(errs, errors.New("no authentication: set identityFiles or agent"))
	}
	for name, h := range c.Hosts {
		if name == "" || strings.ContainsAny(name, " \t\n/") {
			errs = append(errs, fmt.Errorf("host name %q is not a simple name", name))
		}
		if h.Address == "" {
			errs = append(errs, fmt.Errorf("host %q: address is required", name))
		} else if _, err := normalizeAddr(h.Address); err != nil {
			errs = append(errs, fmt.Errorf("host %q: %w", name, err))
		}
		if h.User == "" {
			errs = append(errs, fmt.Errorf("host %q: user is required", name))
		}
		if path.IsAbs(h.WorkspaceDir) && path.Clean(h.WorkspaceDir) == "/" {
			errs = append(errs, fmt.Errorf("host %q: workspaceDir must not be /", name))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"dialTimeout", c.DialTimeout}, {"keepaliveInterval", c.KeepaliveInterval}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	errs = append(errs, c.Exec.DurationProblems()...)
	if c.KeepaliveCountMax < 1 {
		errs = append(errs, fmt.Errorf("keepaliveCountMax must be at least 1, got %d", c.KeepaliveCountMax))
	}
	if c.MaxSessions < 4 {
		errs = append(errs, fmt.Errorf("maxSessions must be at least 4 (sftp, two for kills, one for commands), got %d", c.MaxSessions))
	}
	if c.InboxAgent != InboxAgentAuto && c.InboxAgent != InboxAgentOff {
		errs = append(errs, fmt.Errorf("inboxAgent %q must be %q or %q", c.InboxAgent, InboxAgentAuto, InboxAgentOff))
	}
	if c.AgentBinary != "" && !path.IsAbs(c.AgentBinary) {
		errs = append(errs, fmt.Errorf("agentBinary %q is not an absolute path", c.AgentBinary))
	}
	if c.InboxAgentBinary != "" && !path.IsAbs(c.InboxAgentBinary) {
		errs = append(errs, fmt.Errorf("inboxAgentBinary (deprecated: agentBinary) %q is not an absolute path", c.InboxAgentBinary))
	}
	if c.InboxAgentBinary != "" && c.AgentBinary != "" && c.InboxAgentBinary != c.AgentBinary {
		errs = append(errs, fmt.Errorf("agentBinary %q and its deprecated alias inboxAgentBinary %q differ: keep agentBinary only", c.AgentBinary, c.InboxAgentBinary))
	}
	errs = append(errs, c.Exec.ProgramProblems()...)
	return errors.Join(errs...)
}

// normalizeAddr adds port 22 to a bare host and checks the form.
func normalizeAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return net.JoinHostPort(strings.Trim(a, "[]"), "22"), nil
		}
		return "", fmt.Errorf("address %q: %w", a, err)
	}
	if host == "" || port == "" {
		return "", fmt.Errorf("address %q has no host or port", a)
	}
	return net.JoinHostPort(host, port), nil
}
