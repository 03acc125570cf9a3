package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/kubernetes"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// serve runs the broker until SIGINT or SIGTERM: configuration, state
// directory and token, tenants, TLS, audit and backends, then the server.
func (c *CLI) serve(ctx context.Context, args []string) error {
	fs := c.flagSet("serve", "[flags]")
	f := bindFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("serve takes no arguments, got %q", fs.Args())
	}
	cfg, err := c.resolveServeConfig(fs, f)
	if err != nil {
		return err
	}
	logger := newServeLogger(cfg, c.Stderr)
	c.tuneGC(logger)
	if err := c.prepareState(&cfg); err != nil {
		return err
	}
	unlock, err := lockState(cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	// Bound before the token exists: a start that cannot listen must not
	// print a new token "shown only this once" that the next start, the
	// one that works, would never show.
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("%w (--listen or BROKER_LISTEN picks another address)", err)
	}
	defer ln.Close()
	if err := c.ensureServeToken(cfg); err != nil {
		return err
	}
	reg, watched, err := buildTenants(cfg, c.configFile(f))
	if err != nil {
		return err
	}
	tlsCfg, err := serverTLS(cfg.TLS)
	if err != nil {
		return err
	}
	auditLog, unauthLog, err := openAudits(cfg, logger)
	if err != nil {
		return err
	}
	defer auditLog.Close()
	defer unauthLog.Close()

	backends, closeBackends, err := newBackends(cfg, logger)
	if err != nil {
		return err
	}
	defer closeBackends()

	mcpCfg, err := cfg.MCP.config()
	if err != nil {
		return err
	}
	profiles, err := profilesOf(cfg)
	if err != nil {
		return err
	}
	bcfg := broker.Config{
		MCP:               mcpCfg,
		Profiles:          profiles,
		Addr:              cfg.Listen,
		DefaultBackend:    cfg.DefaultBackend,
		Tenants:           reg,
		Audit:             auditLog,
		UnauthAudit:       unauthLog,
		OwnersFile:        filepath.Join(cfg.StateDir, "owners.json"),
		EnvFile:           filepath.Join(cfg.StateDir, "env.json"),
		ProcessDir:        filepath.Join(cfg.StateDir, "processes"),
		Processes:         bgproc.Limits{LogBytes: cfg.Processes.LogBytes, Processes: cfg.Processes.Max},
		TLS:               tlsCfg,
		MaxUploadBytes:    cfg.MaxUploadBytes,
		MaxArchiveBytes:   cfg.MaxArchiveBytes,
		MaxArchiveEntries: cfg.MaxArchiveEntries,
		ShutdownGrace:     cfg.ShutdownGrace,
	}
	cfg.HTTP.apply(&bcfg)
	srv, err := broker.New(bcfg, backends, logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	watchTenants(ctx, srv, watched, func() (*tenant.Registry, []string, error) {
		fresh, err := c.resolveServeConfig(fs, f)
		if err != nil {
			return nil, nil, err
		}
		return buildTenants(fresh, c.configFile(f))
	}, logger)
	logger.Info("broker starting", "listen", ln.Addr().String(), "identity", cfg.Identity, "state_dir", cfg.StateDir,
		"token_file", cfg.TokenFile, "backends", slices.Sorted(maps.Keys(backends)), "default_backend", cfg.DefaultBackend)
	c.printNextStep(cfg, ln.Addr(), tlsCfg != nil)
	return serveUntilStopped(ctx, srv, ln, logger)
}

// newServeLogger is the JSON logger on stderr at cfg's level.
func newServeLogger(cfg serveConfig, stderr io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated by resolveServeConfig
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// prepareState makes the state directory and the broker's identity.
func (c *CLI) prepareState(cfg *serveConfig) error {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if cfg.Identity == "" {
		id, err := ensureIdentity(filepath.Join(cfg.StateDir, identityFileName))
		if err != nil {
			return fmt.Errorf("broker identity: %w", err)
		}
		cfg.Identity = id
	}
	return nil
}

// ensureServeToken makes the token file, without tenants, printing a new
// token once.
func (c *CLI) ensureServeToken(cfg serveConfig) error {
	if cfg.tenants() != nil {
		return nil
	}
	token, created, err := ensureToken(cfg.TokenFile)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if created {
		// Printed once, outside the logs: tokens never appear in a log line.
		fmt.Fprintf(c.Stderr, "broker: created a new API token in %s (shown only this once):\n%s\n", cfg.TokenFile, token)
	}
	return nil
}

// serveUntilStopped serves on ln until ctx ends. Serve returns after a
// graceful shutdown: listener closed, running commands killed, in-flight
// requests given ShutdownGrace.
func serveUntilStopped(ctx context.Context, srv *broker.Server, ln net.Listener, logger *slog.Logger) error {
	if err := srv.Serve(ctx, ln); err != nil {
		logger.Error("broker stopped with an error", "err", err)
		return err
	}
	logger.Info("broker stopped")
	return nil
}

// printNextStep tells a newcomer how to reach the broker that just
// started: the CLI command with whatever environment it needs beyond the
// defaults, and the same with curl. It goes to stdout: stderr carries the
// JSON log, one object per line, for whatever collects it.
func (c *CLI) printNextStep(cfg serveConfig, addr net.Addr, tls bool) {
	url := brokerURL(addr, tls)
	var env []string
	if url != defaultURL {
		env = append(env, "BROKER_URL="+url)
	}
	where := "the bearer token is in " + cfg.TokenFile
	auth := fmt.Sprintf("$(cat %s)", cfg.TokenFile)
	if cfg.tenants() != nil {
		where = "clients use a tenant's token (the config's tenants section)"
		auth = "<token>"
		env = append(env, "BROKER_TOKEN=<token>")
	} else if !c.isDefaultTokenFile(cfg.TokenFile) {
		env = append(env, "BROKER_TOKEN_FILE="+cfg.TokenFile)
	}
	cmd := strings.TrimSpace(strings.Join(env, " ") + " " + programName() + " ws create")
	fmt.Fprintf(c.Stdout, "broker: serving %s; %s.\n"+
		"A workspace created without a backend is a %s one (ws create --backend picks another).\n"+
		"Next, from another shell, create a workspace (it prints the id):\n"+
		"  %s\n"+
		"or with curl:\n"+
		"  curl -H \"Authorization: Bearer %s\" -H 'Content-Type: application/json' -d '{}' %s/v1/workspaces\n",
		url, where, cfg.DefaultBackend, cmd, auth, url)
}

// programName is how the user ran this binary (./bin/broker), so the
// next step can be pasted; "broker" when that path is a temporary one
// (go run, go test) or the binary has another name.
func programName() string {
	p := os.Args[0]
	if filepath.Base(p) != "broker" || strings.Contains(p, "go-build") {
		return "broker"
	}
	return p
}

// isDefaultTokenFile reports whether a client in another shell finds
// path by itself. BROKER_STATE_DIR may be set for serve alone, so a path
// under it does not count.
func (c *CLI) isDefaultTokenFile(path string) bool {
	if c.Getenv("BROKER_STATE_DIR") != "" {
		return false
	}
	dir, err := c.defaultStateDir()
	return err == nil && filepath.Join(dir, tokenFileName) == path
}

// brokerURL is the URL a client on this machine uses to reach addr: an
// unspecified listen address (0.0.0.0, ::) is reached on loopback.
func brokerURL(addr net.Addr, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// newBackends builds the backends cfg asks for: local always, ssh when
// its section is configured, docker likewise. The returned func closes them all.
func newBackends(cfg serveConfig, logger *slog.Logger) (map[string]opsapi.Backend, func(), error) {
	backends := map[string]opsapi.Backend{}
	var closers []io.Closer
	closeAll := func() {
		for _, c := range slices.Backward(closers) {
			c.Close()
		}
	}
	lb, err := local.New(cfg.Local, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("local backend: %w", err)
	}
	backends[lb.Name()] = lb
	closers = append(closers, lb)
	if cfg.SSH != nil {
		sb, err := ssh.New(*cfg.SSH, logger)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("ssh backend: %w", err)
		}
		backends[sb.Name()] = sb
		closers = append(closers, sb)
	}
	if cfg.Docker != nil {
		dc := *cfg.Docker
		dc.Identity = cfg.Identity
		if dc.RunDir == "" {
			// The agents' sockets live with the broker's other state,
			// so a restarted broker finds them again.
			dc.RunDir = filepath.Join(cfg.StateDir, "run")
		}
		if dc.DiskDir == "" {
			dc.DiskDir = filepath.Join(cfg.StateDir, "disks")
		}
		db, err := docker.New(dc, logger)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("docker backend: %w", err)
		}
		backends[db.Name()] = db
		closers = append(closers, db)
	}
	if cfg.Kubernetes != nil {
		kc := *cfg.Kubernetes
		kc.Identity = cfg.Identity
		kb, err := kubernetes.New(kc, logger)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("kubernetes backend: %w", err)
		}
		backends[kb.Name()] = kb
		closers = append(closers, kb)
	}
	return backends, closeAll, nil
}
