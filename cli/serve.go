package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/opsapi"
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
	token, created, err := ensureToken(cfg.TokenFile)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if created {
		// Printed once, outside the logs: tokens never appear in a log line.
		fmt.Fprintf(c.Stderr, "broker: created a new API token in %s (shown only this once):\n%s\n", cfg.TokenFile, token)
	}

	lb, err := local.New(cfg.Local, logger)
	if err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	defer lb.Close()
	backends := map[string]opsapi.Backend{lb.Name(): lb}

	srv, err := broker.New(broker.Config{
		Addr:           cfg.Listen,
		Tokens:         []string{token},
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
	logger.Info("broker starting", "listen", ln.Addr().String(), "state_dir", cfg.StateDir,
		"token_file", cfg.TokenFile, "backends", []string{lb.Name()})
	// Serve returns after a graceful shutdown: listener closed, running
	// commands killed, in-flight requests given ShutdownGrace.
	if err := srv.Serve(ctx, ln); err != nil {
		logger.Error("broker stopped with an error", "err", err)
		return err
	}
	logger.Info("broker stopped")
	return nil
}
