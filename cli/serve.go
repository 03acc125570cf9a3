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
	"syscall"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
)

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
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated by resolveServeConfig
	logger := slog.New(slog.NewJSONHandler(c.Stderr, &slog.HandlerOptions{Level: level}))

	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if cfg.tenants() == nil {
		token, created, err := ensureToken(cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		if created {
			// Printed once, outside the logs: tokens never appear in a log line.
			fmt.Fprintf(c.Stderr, "broker: created a new API token in %s (shown only this once):\n%s\n", cfg.TokenFile, token)
		}
	}
	reg, watched, err := buildTenants(cfg, c.configFile(f))
	if err != nil {
		return err
	}
	tlsCfg, err := serverTLS(cfg.TLS)
	if err != nil {
		return err
	}
	auditLog, err := openAudit(cfg, logger)
	if err != nil {
		return err
	}
	defer auditLog.Close()

	backends, closeBackends, err := newBackends(cfg, logger)
	if err != nil {
		return err
	}
	defer closeBackends()

	srv, err := broker.New(broker.Config{
		Addr:           cfg.Listen,
		Tenants:        reg,
		Audit:          auditLog,
		OwnersFile:     filepath.Join(cfg.StateDir, "owners.json"),
		TLS:            tlsCfg,
		MaxUploadBytes: cfg.MaxUploadBytes,
		ShutdownGrace:  cfg.ShutdownGrace,
	}, backends, logger)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
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
	logger.Info("broker starting", "listen", ln.Addr().String(), "state_dir", cfg.StateDir,
		"token_file", cfg.TokenFile, "backends", slices.Sorted(maps.Keys(backends)))
	// Serve returns after a graceful shutdown: listener closed, running
	// commands killed, in-flight requests given ShutdownGrace.
	if err := srv.Serve(ctx, ln); err != nil {
		logger.Error("broker stopped with an error", "err", err)
		return err
	}
	logger.Info("broker stopped")
	return nil
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
		db, err := docker.New(*cfg.Docker, logger)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("docker backend: %w", err)
		}
		backends[db.Name()] = db
		closers = append(closers, db)
	}
	return backends, closeAll, nil
}
