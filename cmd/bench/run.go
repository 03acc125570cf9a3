package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Config is one run's settings (see the flags in main.go).
type Config struct {
	Duration       time.Duration // length of load.mixed
	OpTime         time.Duration // per latency row and target
	Clients        int           // load.mixed clients
	Rate           float64       // calls/s per load client; 0 = back to back
	StreamBytes    int64         // input bytes of stream.base64
	StreamRuns     int           // repetitions of stream.base64
	ArchiveBytes   int64         // file content of the archive.* rows' tar
	HostileClients int           // slow uploads, and streaming execs, of the hostile scenario
	HostileUnauth  int           // unauthenticated requests of its burst
	HostileTime    time.Duration // how long each slow upload and exec lasts
	Only           string        // regexp over row names
	Targets        string        // regexp over target names
	Backends       []string      // backends whose targets run: local, ssh, docker
	BrokerBin      string
	BrokerLogLevel string
	SampleEvery    time.Duration // RSS sampling interval
	Quick          bool
}

// defaultConfig is a full run: the targets' conditions.
func defaultConfig() Config {
	return Config{
		Duration:       30 * time.Second,
		OpTime:         2 * time.Second,
		Clients:        256,
		Rate:           1,
		StreamBytes:    1 << 30,
		StreamRuns:     1,
		ArchiveBytes:   100 << 20,
		HostileClients: 200,
		HostileUnauth:  2000,
		HostileTime:    15 * time.Second,
		BrokerLogLevel: "info",
		Backends:       []string{"local"},
		SampleEvery:    10 * time.Millisecond,
	}
}

// quickConfig turns c into the -quick smoke run, keeping the values of
// the flags in explicit.
func quickConfig(c Config, explicit map[string]bool) Config {
	c.Quick = true
	if !explicit["duration"] {
		c.Duration = 3 * time.Second
	}
	if !explicit["op-time"] {
		c.OpTime = 200 * time.Millisecond
	}
	if !explicit["stream-bytes"] {
		c.StreamBytes = 64 << 20
	}
	if !explicit["archive-bytes"] {
		c.ArchiveBytes = 16 << 20
	}
	if !explicit["hostile-time"] {
		c.HostileTime = 3 * time.Second
	}
	return c
}

// Validate rejects settings that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Duration <= 0, c.OpTime <= 0:
		return errors.New("-duration and -op-time must be positive")
	case c.ArchiveBytes < 1:
		return errors.New("-archive-bytes must be positive")
	case c.Clients < 1:
		return errors.New("-clients must be at least 1")
	case c.Rate < 0:
		return errors.New("-rate must not be negative")
	case c.StreamBytes < 0, c.StreamRuns < 1:
		return errors.New("-stream-bytes must not be negative and -stream-runs must be at least 1")
	case c.HostileClients < 1, c.HostileUnauth < 0, c.HostileTime <= 0:
		return errors.New("-hostile-clients must be at least 1, -hostile-unauth not negative, -hostile-time positive")
	case c.SampleEvery <= 0:
		return errors.New("the RSS sampling interval must be positive")
	}
	if _, err := regexp.Compile(c.Only); err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	if _, err := regexp.Compile(c.Targets); err != nil {
		return fmt.Errorf("-targets: %w", err)
	}
	if len(c.Backends) == 0 {
		return errors.New("-backends names no backend")
	}
	for _, b := range c.Backends {
		if _, ok := backendTargets[b]; !ok {
			return fmt.Errorf("-backends: unknown backend %q (want local, ssh or docker)", b)
		}
	}
	return nil
}

// Env is what targets and scenarios share during a run.
type Env struct {
	Config  Config
	Logger  *slog.Logger
	TempDir string

	buildOnce sync.Once
	bin       string
	buildErr  error

	sftpOnce sync.Once // the docker targets' static SFTP server
	sftpBin  string
	sftpErr  error
}

// brokerBinary returns Config.BrokerBin, or builds ./cmd/broker of this
// module once into the run's temporary directory.
func (e *Env) brokerBinary(ctx context.Context) (string, error) {
	if e.Config.BrokerBin != "" {
		return e.Config.BrokerBin, nil
	}
	e.buildOnce.Do(func() {
		gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil {
			e.buildErr = fmt.Errorf("finding the module: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		bin := filepath.Join(e.TempDir, "broker")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/broker")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			e.buildErr = fmt.Errorf("building ./cmd/broker: %w\n%s", err, out)
			return
		}
		e.bin = bin
	})
	return e.bin, e.buildErr
}

// Row is a Result with the target it was measured on.
type Row struct {
	Result
	Target  string
	Backend string
	Via     string
}

// Report is everything a run measured.
type Report struct {
	Started time.Time
	// LoadAvg is /proc/loadavg's 1-minute figure at the start and the end:
	// on a shared machine it says how much of the CPU the run had.
	LoadAvg  [2]string
	Config   Config
	Rows     []Row
	Failures []string
}

// run runs every scenario on every target, logging progress to
// progress, and returns the report. A scenario that fails on a target
// is recorded in Failures and the run goes on.
func run(ctx context.Context, cfg Config, logger *slog.Logger, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	only, onlyTargets := regexp.MustCompile(cfg.Only), regexp.MustCompile(cfg.Targets)
	tmp, err := os.MkdirTemp("", "wsbroker-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	env := &Env{Config: cfg, Logger: logger, TempDir: tmp}
	rep := &Report{Started: time.Now(), Config: cfg}
	rep.LoadAvg[0] = loadAvg()
	defer func() { rep.LoadAvg[1] = loadAvg() }()
	for _, sc := range scenarios() {
		var rows []string
		for _, r := range sc.Rows(cfg) {
			if only.MatchString(r) {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		if sc.RunAll != nil {
			for _, b := range cfg.Backends {
				var ts []Target
				for _, t := range targets([]string{b}) {
					if onlyTargets.MatchString(t.Name) && t.offersAny(rows) && sc.runsOn(t) {
						ts = append(ts, t)
					}
				}
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				if len(ts) > 0 {
					runAllOn(ctx, env, sc, ts, rows, rep, progress)
				}
			}
			continue
		}
		for _, t := range targets(cfg.Backends) {
			if !onlyTargets.MatchString(t.Name) || !t.offersAny(rows) || !sc.runsOn(t) {
				continue
			}
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			fmt.Fprintf(progress, "bench: %s on %s\n", strings.Join(rows, ", "), t.Name)
			res, err := runOn(ctx, env, sc, t, rows)
			if err != nil {
				msg := fmt.Sprintf("%s on %s: %v", rows[0], t.Name, err)
				rep.Failures = append(rep.Failures, msg)
				fmt.Fprintf(progress, "bench: FAILED %s\n", msg)
			}
			for _, r := range res {
				rep.Rows = append(rep.Rows, Row{Result: r, Target: t.Name, Backend: t.Backend, Via: t.Via})
			}
		}
	}
	return rep, nil
}

// runOn runs one scenario on a fresh session of one target.
func runOn(ctx context.Context, env *Env, sc Scenario, t Target, rows []string) ([]Result, error) {
	s, err := t.Setup(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	res, err := sc.Run(ctx, env, s, rows)
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cerr := s.Close(closeCtx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close: %w", cerr))
	}
	return res, err
}

// runAllOn runs one scenario on fresh sessions of all of ts (one
// backend's targets) at once, adding rows and failures to rep. A target
// whose setup fails is left out; the others still run.
func runAllOn(ctx context.Context, env *Env, sc Scenario, ts []Target, rows []string, rep *Report, progress io.Writer) {
	fail := func(what string, err error) {
		msg := fmt.Sprintf("%s on %s: %v", rows[0], what, err)
		rep.Failures = append(rep.Failures, msg)
		fmt.Fprintf(progress, "bench: FAILED %s\n", msg)
	}
	var (
		up       []Target
		sessions []*Session
		names    []string
	)
	for _, t := range ts {
		s, err := t.Setup(ctx, env)
		if err != nil {
			fail(t.Name, fmt.Errorf("setup: %w", err))
			continue
		}
		up, sessions, names = append(up, t), append(sessions, s), append(names, t.Name)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i, s := range sessions {
			if err := s.Close(closeCtx); err != nil {
				fail(up[i].Name, fmt.Errorf("close: %w", err))
			}
		}
	}()
	if len(sessions) == 0 {
		return
	}
	fmt.Fprintf(progress, "bench: %s on %s, taking turns\n", strings.Join(rows, ", "), strings.Join(names, ", "))
	res, err := sc.RunAll(ctx, env, sessions, rows)
	if err != nil {
		fail(strings.Join(names, ", "), err)
	}
	for i, rs := range res {
		for _, r := range rs {
			rep.Rows = append(rep.Rows, Row{Result: r, Target: up[i].Name, Backend: up[i].Backend, Via: up[i].Via})
		}
	}
}

// loadAvg returns the 1-minute load average, "" when unknown.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return ""
}

// runtimeInfo describes the machine for the report.
func runtimeInfo() map[string]any {
	return map[string]any{
		"goVersion": runtime.Version(),
		"os":        runtime.GOOS,
		"arch":      runtime.GOARCH,
		"cpus":      runtime.NumCPU(),
	}
}
