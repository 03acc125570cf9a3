package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/tenant"
)

// serveConfig is everything `broker serve` can be told. The YAML keys are
// those of the --config file; each field also has an environment variable
// and a flag (see bindFlags), which win in that order.
type serveConfig struct {
	// Listen is the address to serve on (BROKER_LISTEN, --listen).
	Listen string `yaml:"listen"`
	// StateDir holds the token and the workspaces (BROKER_STATE_DIR,
	// --state-dir).
	StateDir string `yaml:"stateDir"`
	// TokenFile holds the bearer token; created with a random token when
	// missing (BROKER_TOKEN_FILE, --token-file; default <state_dir>/token).
	TokenFile string `yaml:"tokenFile"`
	// Identity names this broker on a shared container engine: it labels
	// every container and volume, and the broker adopts only what carries
	// it. Replicas meant to share workspaces share one identity
	// (BROKER_IDENTITY, --identity; default a random one kept in
	// <stateDir>/identity).
	Identity string `yaml:"identity"`
	// DefaultBackend is the backend of a create that names none
	// (BROKER_DEFAULT_BACKEND, --default-backend): by default docker when
	// the docker backend is served, else local. It must be served.
	DefaultBackend string `yaml:"defaultBackend"`
	// LogLevel is debug, info, warn or error (BROKER_LOG_LEVEL, --log-level).
	LogLevel string `yaml:"logLevel"`
	// ShutdownGrace is how long in-flight requests may finish after
	// SIGINT/SIGTERM (BROKER_SHUTDOWN_GRACE, --shutdown-grace).
	ShutdownGrace time.Duration `yaml:"shutdownGrace"`
	// MaxUploadBytes bounds one file upload (BROKER_MAX_UPLOAD_BYTES,
	// --max-upload-bytes).
	MaxUploadBytes int64 `yaml:"maxUploadBytes"`
	// MaxArchiveBytes and MaxArchiveEntries bound one tar in or out of a
	// workspace (PUT and GET /archive; broker cp): file content and
	// entries. Defaults 1 GiB and 100,000.
	MaxArchiveBytes   int64 `yaml:"maxArchiveBytes"`
	MaxArchiveEntries int   `yaml:"maxArchiveEntries"`
	// Processes bounds each workspace's background processes: logBytes
	// (each one's log, default 4 MiB) and max (how many a workspace
	// keeps, default 32). Their logs live in <stateDir>/processes.
	Processes processesConfig `yaml:"processes"`
	// Local configures the local backend (its own YAML keys: killGrace,
	// drainIdle, maxDrain, shell, rgPath); its stateDir defaults to
	// <stateDir>/local.
	Local local.Config `yaml:"local"`
	// SSH configures the ssh backend (package ssh's Config: its own YAML
	// keys knownHostsFiles, identityFiles, agent, hosts, ...). The
	// backend is served only when this section is present or an --ssh-*
	// flag is given; nil means off.
	SSH *ssh.Config `yaml:"ssh"`
	// Docker configures the docker backend (package docker's Config: its
	// own YAML keys host, defaultImage, memory, network, idleTTL, ...).
	// The backend is served only when this section is present or
	// --docker/--docker-host is given; nil means off, so a zero-config
	// start needs no engine.
	Docker *docker.Config `yaml:"docker"`
	// Kubernetes configures the kubernetes backend (package kubernetes's
	// Config: kubeconfig, namespace, defaultImage, memory, disk,
	// runtimeClassName, network, ...). Served only when this section is
	// present; nil means off.
	Kubernetes *kubernetes.Config `yaml:"kubernetes"`
	// Tenants, when present, replace the token file: each has its own
	// token hashes, quotas, backends, images and policy file (see
	// docs/tenancy.md). They reload on SIGHUP and when a file changes.
	// A pointer keeps serveConfig comparable.
	Tenants *[]tenant.Config `yaml:"tenants"`
	// Audit configures the audit trail (default <stateDir>/audit/audit.jsonl).
	Audit auditConfig `yaml:"audit"`
	// TLS serves HTTPS, and mTLS with a client CA file.
	TLS *tlsConfig `yaml:"tls"`
	// MCP configures the MCP endpoints: the session cap, idle
	// expiry, keeping a session's workspaces. A pointer keeps serveConfig
	// comparable.
	MCP *mcpConfig `yaml:"mcp"`
	// Profiles are named workspace specs (backend and options) a create
	// names instead: POST /v1/workspaces {"profile": NAME}, `broker ws
	// create --profile`, the MCP endpoints' ?profile=NAME. mcp.profiles,
	// their older place, is still read. A pointer keeps serveConfig
	// comparable.
	Profiles *map[string]mcpProfile `yaml:"profiles"`
	// HTTP holds the limits against hostile clients: allowed Host names,
	// the body budget, minimum body rate, connection caps. A pointer
	// keeps serveConfig comparable.
	HTTP *httpLimits `yaml:"http"`
}

// defaultServeConfig is the zero-config start. StateDir is filled in by
// the caller from the XDG rules, because it depends on the environment.
// Local workspaces are filesystems of their own of
// local.RecommendedDiskBytes where the host can give them (root, loop
// devices), so one cannot fill the state directory's; local.limits.
// diskBytes sets another size, -1 none.
func defaultServeConfig() serveConfig {
	return serveConfig{
		Listen:        "127.0.0.1:8722",
		LogLevel:      "info",
		ShutdownGrace: 10 * time.Second,
		Local:         local.Config{DefaultDiskBytes: local.RecommendedDiskBytes},
	}
}

// loadConfigFile overlays the YAML file at path on cfg. Unknown keys are
// errors, so a typo does not silently fall back to a default.
func loadConfigFile(path string, cfg *serveConfig) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// applyEnv overlays the BROKER_* variables that are set.
func (c *CLI) applyEnv(cfg *serveConfig) error {
	str := func(name string, dst *string) {
		if v := c.Getenv(name); v != "" {
			*dst = v
		}
	}
	str("BROKER_LISTEN", &cfg.Listen)
	str("BROKER_STATE_DIR", &cfg.StateDir)
	str("BROKER_TOKEN_FILE", &cfg.TokenFile)
	str("BROKER_IDENTITY", &cfg.Identity)
	str("BROKER_LOG_LEVEL", &cfg.LogLevel)
	str("BROKER_DEFAULT_BACKEND", &cfg.DefaultBackend)
	if v := c.Getenv("BROKER_SHUTDOWN_GRACE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("BROKER_SHUTDOWN_GRACE: %w", err)
		}
		cfg.ShutdownGrace = d
	}
	if v := c.Getenv("BROKER_MAX_UPLOAD_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("BROKER_MAX_UPLOAD_BYTES: %w", err)
		}
		cfg.MaxUploadBytes = n
	}
	return nil
}

// serveFlags holds the flag values; only flags given on the command line
// are applied (see applyFlags), so an unset flag does not hide the
// environment or the file.
type serveFlags struct {
	config string
	cfg    serveConfig

	// The ssh backend's flags. Repeated list flags replace the file's
	// list; --ssh-host adds a host or replaces the file's host of that
	// name.
	sshKnownHosts stringList
	sshIdentities stringList
	sshHosts      hostList
	sshAgent      bool
	sshInsecure   bool

	// The docker backend's flags.
	docker     bool
	dockerHost string
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*l = append(*l, v)
	return nil
}

// hostList is the repeatable --ssh-host flag: name=user@host[:port].
type hostList map[string]ssh.Host

func (l *hostList) String() string {
	var parts []string
	for name, h := range *l {
		parts = append(parts, name+"="+h.User+"@"+h.Address)
	}
	return strings.Join(parts, ",")
}

func (l *hostList) Set(v string) error {
	name, target, ok := strings.Cut(v, "=")
	user, addr, ok2 := strings.Cut(target, "@")
	if !ok || !ok2 || name == "" || user == "" || addr == "" {
		return fmt.Errorf("%q: want name=user@host[:port]", v)
	}
	if *l == nil {
		*l = hostList{}
	}
	(*l)[name] = ssh.Host{Address: addr, User: user}
	return nil
}

func bindFlags(fs *flag.FlagSet) *serveFlags {
	f := &serveFlags{}
	fs.StringVar(&f.config, "config", "", "YAML config file (default $BROKER_CONFIG)")
	fs.StringVar(&f.cfg.Listen, "listen", "", "listen address (default $BROKER_LISTEN or 127.0.0.1:8722)")
	fs.StringVar(&f.cfg.StateDir, "state-dir", "", "state directory (default $BROKER_STATE_DIR, $XDG_STATE_HOME/wsbroker or ~/.local/state/wsbroker)")
	fs.StringVar(&f.cfg.TokenFile, "token-file", "", "bearer token file, created when missing (default $BROKER_TOKEN_FILE or <state dir>/token)")
	fs.StringVar(&f.cfg.Identity, "identity", "", "this broker's name on a shared container engine; replicas sharing workspaces share it (default $BROKER_IDENTITY or a random one kept in <state dir>/identity)")
	fs.StringVar(&f.cfg.LogLevel, "log-level", "", "debug, info, warn or error (default $BROKER_LOG_LEVEL or info)")
	fs.DurationVar(&f.cfg.ShutdownGrace, "shutdown-grace", 0, "time in-flight requests get to finish on SIGINT/SIGTERM (default 10s)")
	fs.Int64Var(&f.cfg.MaxUploadBytes, "max-upload-bytes", 0, "largest file upload accepted (default 256 MiB)")
	fs.Var(&f.sshKnownHosts, "ssh-known-hosts", "ssh backend: known_hosts file host keys are verified against (repeatable; enables the ssh backend)")
	fs.Var(&f.sshIdentities, "ssh-identity", "ssh backend: private key file to log in with (repeatable; enables the ssh backend)")
	fs.Var(&f.sshHosts, "ssh-host", "ssh backend: a host workspaces may be created on, name=user@host[:port] (repeatable; enables the ssh backend)")
	fs.BoolVar(&f.sshAgent, "ssh-agent", false, "ssh backend: also log in with the keys of the ssh-agent at $SSH_AUTH_SOCK (enables the ssh backend)")
	fs.BoolVar(&f.docker, "docker", false, "enable the docker backend with its defaults (engine at unix:///var/run/docker.sock, image wsbroker/workspace:current) and make it the default backend")
	fs.StringVar(&f.cfg.DefaultBackend, "default-backend", "", "backend of a workspace created without one: local, docker, ssh or kubernetes, served (default $BROKER_DEFAULT_BACKEND, else docker when served, else local)")
	fs.StringVar(&f.dockerHost, "docker-host", "", "docker backend: the engine's address, unix:///path or tcp://host:port (enables the docker backend; DOCKER_HOST is not read)")
	fs.BoolVar(&f.sshInsecure, "ssh-insecure-ignore-host-key", false, "ssh backend: INSECURE, accept any host key (throwaway labs only; logged loudly)")
	return f
}

func (f *serveFlags) apply(fs *flag.FlagSet, cfg *serveConfig) {
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "listen":
			cfg.Listen = f.cfg.Listen
		case "state-dir":
			cfg.StateDir = f.cfg.StateDir
		case "token-file":
			cfg.TokenFile = f.cfg.TokenFile
		case "identity":
			cfg.Identity = f.cfg.Identity
		case "log-level":
			cfg.LogLevel = f.cfg.LogLevel
		case "default-backend":
			cfg.DefaultBackend = f.cfg.DefaultBackend
		case "shutdown-grace":
			cfg.ShutdownGrace = f.cfg.ShutdownGrace
		case "max-upload-bytes":
			cfg.MaxUploadBytes = f.cfg.MaxUploadBytes
		case "ssh-known-hosts":
			sshSection(cfg).KnownHostsFiles = f.sshKnownHosts
		case "ssh-identity":
			sshSection(cfg).IdentityFiles = f.sshIdentities
		case "ssh-agent":
			if f.sshAgent || cfg.SSH != nil { // =false alone turns nothing on
				sshSection(cfg).Agent = f.sshAgent
			}
		case "ssh-insecure-ignore-host-key":
			if f.sshInsecure || cfg.SSH != nil {
				sshSection(cfg).InsecureIgnoreHostKey = f.sshInsecure
			}
		case "docker":
			switch {
			case !f.docker:
				cfg.Docker = nil // --docker=false turns the file's section off
			case cfg.Docker == nil:
				cfg.Docker = &docker.Config{} // all defaults
			}
		case "docker-host":
			if cfg.Docker == nil {
				cfg.Docker = &docker.Config{}
			}
			cfg.Docker.Host = f.dockerHost
		case "ssh-host":
			s := sshSection(cfg)
			hosts := make(map[string]ssh.Host, len(s.Hosts)+len(f.sshHosts))
			for name, h := range s.Hosts {
				hosts[name] = h
			}
			for name, h := range f.sshHosts {
				hosts[name] = h
			}
			s.Hosts = hosts
		}
	})
}

// sshSection returns cfg's ssh section, creating an empty one (all
// defaults) when the file had none: any --ssh-* flag turns the backend on.
func sshSection(cfg *serveConfig) *ssh.Config {
	if cfg.SSH == nil {
		cfg.SSH = &ssh.Config{}
	}
	return cfg.SSH
}

// resolveServeConfig merges defaults, the config file, the environment
// and the flags, weakest first.
func (c *CLI) resolveServeConfig(fs *flag.FlagSet, f *serveFlags) (serveConfig, error) {
	cfg := defaultServeConfig()
	path := f.config
	if path == "" {
		path = c.Getenv("BROKER_CONFIG")
	}
	if path != "" {
		if err := loadConfigFile(path, &cfg); err != nil {
			return cfg, err
		}
	}
	if err := c.applyEnv(&cfg); err != nil {
		return cfg, err
	}
	f.apply(fs, &cfg)
	if cfg.StateDir == "" {
		d, err := c.defaultStateDir()
		if err != nil {
			return cfg, err
		}
		cfg.StateDir = d
	}
	// Absolute, so that the local backend (which requires it) and the log
	// say where things are whatever the working directory.
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return cfg, fmt.Errorf("state directory: %w", err)
	}
	cfg.StateDir = abs
	if cfg.TokenFile == "" {
		cfg.TokenFile = filepath.Join(cfg.StateDir, tokenFileName)
	}
	if cfg.Local.StateDir == "" {
		cfg.Local.StateDir = filepath.Join(cfg.StateDir, "local")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return cfg, fmt.Errorf("log level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	if cfg.ShutdownGrace < 0 || cfg.MaxUploadBytes < 0 || cfg.MaxArchiveBytes < 0 || cfg.MaxArchiveEntries < 0 ||
		cfg.Processes.LogBytes < 0 || cfg.Processes.Max < 0 {
		return cfg, errors.New("shutdownGrace, maxUploadBytes, maxArchiveBytes, maxArchiveEntries, processes.logBytes and processes.max must not be negative")
	}
	if _, err := cfg.MCP.config(); err != nil {
		return cfg, err
	}
	if _, err := profilesOf(cfg); err != nil {
		return cfg, err
	}
	if cfg.DefaultBackend, err = defaultBackend(cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// defaultBackend is the backend of a create that names none: the one
// configured, else docker when it is served (a user who asks for docker
// expects the workspaces it creates to be containers), else local.
func defaultBackend(cfg serveConfig) (string, error) {
	served := map[string]bool{"local": true, "ssh": cfg.SSH != nil, "docker": cfg.Docker != nil, "kubernetes": cfg.Kubernetes != nil}
	switch name := cfg.DefaultBackend; {
	case name == "" && cfg.Docker != nil:
		return "docker", nil
	case name == "":
		return "local", nil
	case !served[name]:
		return "", fmt.Errorf("default backend %q is not served (served: %s)", name, strings.Join(servedNames(served), ", "))
	default:
		return name, nil
	}
}

// servedNames lists the backends served, sorted.
func servedNames(served map[string]bool) []string {
	var names []string
	for name, on := range served {
		if on {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// processesConfig is the config file's processes: section.
type processesConfig struct {
	LogBytes int64 `yaml:"logBytes"`
	Max      int   `yaml:"max"`
}
