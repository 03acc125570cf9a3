package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
)

// auditConfig is the audit section of the serve configuration.
type auditConfig struct {
	// File is the audit log (default <stateDir>/audit/audit.jsonl).
	File string `yaml:"file"`
	// MaxBytes rotates the file past this size (default 100 MiB); the
	// chain continues in the next file.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxFiles and MaxTotalBytes are the retention of rotated files
	// (default 10 files, 1 GiB): past either the oldest are deleted;
	// -1 keeps them all.
	MaxFiles      int   `yaml:"maxFiles"`
	MaxTotalBytes int64 `yaml:"maxTotalBytes"`
	// MinFree is the free space the audit file's filesystem must keep
	// for calls to be served (default 1 MiB; -1 no check): under it, or
	// after a failed write, every /v1 call is refused with 503.
	MinFree int64 `yaml:"minFree"`
	// Reserve is the space the audit keeps allocated beside its file for
	// records written while its filesystem is full (default 4 MiB; -1
	// none): workspaces share that filesystem by default.
	Reserve int64 `yaml:"reserve"`
	// Disabled keeps no audit trail.
	Disabled bool `yaml:"disabled"`
}

// tlsConfig is the tls section: HTTPS, and mTLS when ClientCAFile is set.
type tlsConfig struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ClientCAFile (PEM) makes the listener require a client certificate
	// issued by one of these CAs before any request is read.
	ClientCAFile string `yaml:"clientCAFile"`
}

// Audit defaults: rotate at 100 MiB, keep 10 rotated files and 1 GiB.
const (
	defaultAuditMaxBytes      = 100 << 20
	defaultAuditMaxFiles      = 10
	defaultAuditMaxTotalBytes = 1 << 30
)

// reloadInterval is how often serve looks for a changed config, token or
// policy file; SIGHUP reloads at once.
var reloadInterval = 2 * time.Second

// buildTenants makes the registry cfg describes: its tenants section, or
// else the one token of the token file as tenant "default". It also
// returns the files it read, for change detection.
func buildTenants(cfg serveConfig, configPath string) (*tenant.Registry, []string, error) {
	if cfg.tenants() == nil {
		tok, err := readToken(cfg.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("token: %w", err)
		}
		reg, err := tenant.NewRegistry(tenant.WithTokens(tenant.DefaultName, true, tok))
		return reg, []string{cfg.TokenFile}, err
	}
	files := []string{}
	if configPath != "" {
		files = append(files, configPath)
	}
	var ts []*tenant.Tenant
	for _, tc := range cfg.tenants() {
		var pol *policy.Policy
		if tc.Policy != "" {
			path := tc.Policy
			if !filepath.IsAbs(path) && configPath != "" {
				path = filepath.Join(filepath.Dir(configPath), path)
			}
			var err error
			if pol, err = loadPolicy(path); err != nil {
				return nil, nil, fmt.Errorf("tenant %s: %w", tc.Name, err)
			}
			files = append(files, path)
		}
		t, err := tenant.New(tc, pol)
		if err != nil {
			return nil, nil, err
		}
		ts = append(ts, t)
	}
	reg, err := tenant.NewRegistry(ts...)
	return reg, files, err
}

func loadPolicy(path string) (*policy.Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	p, err := policy.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return p, nil
}

// fingerprint hashes the files' contents; a change triggers a reload.
func fingerprint(files []string) [sha256.Size]byte {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		fmt.Fprintf(h, "%s\x00%d\x00%v\x00", f, len(b), err != nil)
		h.Write(b)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// watchTenants reloads the tenants on SIGHUP and when a file they come
// from changes, until ctx ends. A bad file keeps the tenants in force and
// is logged: a typo must not lock everyone out.
func watchTenants(ctx context.Context, srv *broker.Server, files []string, rebuild func() (*tenant.Registry, []string, error), logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		tick := time.NewTicker(reloadInterval)
		defer tick.Stop()
		last := fingerprint(files)
		for {
			why := ""
			select {
			case <-ctx.Done():
				return
			case <-hup:
				why = "SIGHUP"
			case <-tick.C:
				if fingerprint(files) == last {
					continue
				}
				why = "file changed"
			}
			reg, newFiles, err := rebuild()
			if err != nil {
				logger.Error("tenant reload failed; the previous tenants stay in force", "reason", why, "err", err)
				last = fingerprint(files) // do not retry until it changes again
				continue
			}
			srv.SetTenants(reg)
			files, last = newFiles, fingerprint(newFiles)
			logger.Info("tenants reloaded", "reason", why, "tenants", len(reg.Tenants()))
		}
	}()
}

// serverTLS builds the listener's TLS configuration.
func serverTLS(c *tlsConfig) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, errors.New("tls: certFile and keyFile are required")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", c.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// openAudit opens the audit log cfg asks for (nil when disabled).
func openAudit(cfg serveConfig, logger *slog.Logger) (*audit.Log, error) {
	if cfg.Audit.Disabled {
		return nil, nil
	}
	path := cfg.Audit.File
	if path == "" {
		path = filepath.Join(cfg.StateDir, "audit", "audit.jsonl")
	}
	opts := audit.Options{MaxBytes: cfg.Audit.MaxBytes, MaxFiles: cfg.Audit.MaxFiles,
		MaxTotalBytes: cfg.Audit.MaxTotalBytes, MinFree: cfg.Audit.MinFree, Reserve: cfg.Audit.Reserve}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = defaultAuditMaxBytes
	}
	if opts.MaxFiles == 0 {
		opts.MaxFiles = defaultAuditMaxFiles
	}
	if opts.MaxTotalBytes == 0 {
		opts.MaxTotalBytes = defaultAuditMaxTotalBytes
	}
	return audit.OpenWith(path, opts, logger)
}

// openAudits opens the audit log and the trail of requests that fail
// authentication beside it (both nil when disabled).
func openAudits(cfg serveConfig, logger *slog.Logger) (*audit.Log, *audit.Log, error) {
	main, err := openAudit(cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	unauth, err := openUnauthAudit(cfg, logger)
	if err != nil {
		main.Close()
		return nil, nil, err
	}
	return main, unauth, nil
}

// The trail of requests that fail authentication: rotated at 16 MiB, 4
// rotated files or 64 MiB kept, no space check (it admits nothing).
const (
	unauthAuditMaxBytes      = 16 << 20
	unauthAuditMaxFiles      = 4
	unauthAuditMaxTotalBytes = 64 << 20
)

// openUnauthAudit opens the trail of requests that fail authentication,
// beside the audit file (audit.jsonl: audit-unauthenticated.jsonl), with
// a chain and a retention of its own: their volume, which anyone who
// reaches the port chooses, never rotates tenants' records away. Nil
// when the audit is disabled.
func openUnauthAudit(cfg serveConfig, logger *slog.Logger) (*audit.Log, error) {
	if cfg.Audit.Disabled {
		return nil, nil
	}
	path := cfg.Audit.File
	if path == "" {
		path = filepath.Join(cfg.StateDir, "audit", "audit.jsonl")
	}
	ext := filepath.Ext(path)
	path = strings.TrimSuffix(path, ext) + "-unauthenticated" + ext
	return audit.OpenWith(path, audit.Options{MaxBytes: unauthAuditMaxBytes, MaxFiles: unauthAuditMaxFiles,
		MaxTotalBytes: unauthAuditMaxTotalBytes, MinFree: -1, Reserve: -1}, logger)
}

// policyCmd is `broker policy check <file>`.
func (c *CLI) policyCmd(ctx context.Context, args []string) error {
	return c.dispatch(ctx, "policy", args, []subcommand{
		{"check", nil, "validate a policy file and explain each rule", (*CLI).policyCheck},
	})
}

func (c *CLI) policyCheck(_ context.Context, args []string) error {
	fs := c.flagSet("policy check", "<file>")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("usage: broker policy check <file>")
	}
	p, err := loadPolicy(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprint(c.Stdout, p.Explain())
	return nil
}

// auditCmd is `broker audit verify <file...>`.
func (c *CLI) auditCmd(ctx context.Context, args []string) error {
	return c.dispatch(ctx, "audit", args, []subcommand{
		{"verify", nil, "check an audit trail's hash chain", (*CLI).auditVerify},
	})
}

const auditVerifyArgs = "<file...> (oldest first; one current file also takes its rotated files)"

func (c *CLI) auditVerify(_ context.Context, args []string) error {
	fs := c.flagSet("audit verify", auditVerifyArgs)
	if err := parse(fs, args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return usageError("usage: broker audit verify %s", auditVerifyArgs)
	}
	if len(files) == 1 {
		// The current file alone: take its rotated predecessors too.
		rotated, _ := filepath.Glob(files[0] + ".*")
		files = append(rotated, files[0])
	}
	rep, err := audit.Verify(files...)
	if err != nil {
		return err
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(c.Stdout, p)
	}
	start := "from the first record (genesis)"
	if !rep.Anchored {
		start = fmt.Sprintf("from record %d (earlier files not given; records before it are not checked)", rep.FirstSeq)
	}
	fmt.Fprintf(c.Stdout, "%d records in %d files, %s to record %d, last hash %s\n",
		rep.Records, len(files), start, rep.LastSeq, rep.LastHash)
	if len(rep.Problems) > 0 {
		return &exitError{code: exitFail, err: fmt.Errorf("%d problems: the audit trail was altered", len(rep.Problems))}
	}
	fmt.Fprintln(c.Stdout, "ok: the chain is intact")
	return nil
}

// tokenCmd is `broker token new` and `broker token hash [token]`.
func (c *CLI) tokenCmd(ctx context.Context, args []string) error {
	return c.dispatch(ctx, "token", args, []subcommand{
		{"new", nil, "make a random token and the tokenHashes entry for it", (*CLI).tokenNew},
		{"hash", nil, "print the tokenHashes entry of a token (the argument, else a line of stdin)", (*CLI).tokenHash},
	})
}

func (c *CLI) tokenNew(_ context.Context, args []string) error {
	fs := c.flagSet("token new", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("token new takes no arguments, got %q", fs.Args())
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	fmt.Fprintf(c.Stdout, "token: %s\ntokenHashes entry: %s\n", tok, tenant.HashToken(tok))
	return nil
}

func (c *CLI) tokenHash(_ context.Context, args []string) error {
	fs := c.flagSet("token hash", "[token] (reads a line of stdin without one, keeping it out of the shell history)")
	// A token may begin with '-' (base64url): no flag parsing but help.
	if len(args) > 0 && isHelpFlag(args[0]) {
		return parse(fs, args[:1])
	}
	var tok string
	switch len(args) {
	case 0:
		line, err := bufio.NewReader(c.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return usageError("token hash: give the token as an argument or on stdin")
		}
		tok = line
	case 1:
		tok = args[0]
	default:
		return usageError("usage: broker token hash [token]")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return usageError("token hash: the token is empty")
	}
	fmt.Fprintln(c.Stdout, tenant.HashToken(tok))
	return nil
}

// tenants returns the configured tenants; nil means the token file.
func (c serveConfig) tenants() []tenant.Config {
	if c.Tenants == nil || len(*c.Tenants) == 0 {
		return nil
	}
	return *c.Tenants
}

// configFile is the config file serve reads (--config, else
// $BROKER_CONFIG), absolute; "" when none.
func (c *CLI) configFile(f *serveFlags) string {
	path := f.config
	if path == "" {
		path = c.Getenv("BROKER_CONFIG")
	}
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
