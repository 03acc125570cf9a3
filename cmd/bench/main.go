package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain parses flags, runs the harness and prints the report. Exit
// status: 0 done (whatever the verdicts, unless -strict), 1 a scenario
// failed to run, 2 bad flags, 3 -strict and a target was missed.
func runMain(args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "smoke run: 3 s load, 0.2 s per latency row, 64 MiB stream, 3 s hostile load (other flags still apply)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file")
	strict := fs.Bool("strict", false, "exit with status 3 when a target is missed")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of load.mixed")
	fs.DurationVar(&cfg.OpTime, "op-time", cfg.OpTime, "time spent on each latency row per target")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients of load.mixed")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "calls per second of each load.mixed client (paced, open loop); 0 = back to back")
	fs.Int64Var(&cfg.StreamBytes, "stream-bytes", cfg.StreamBytes, "bytes of zeros piped through base64 in stream.base64")
	fs.IntVar(&cfg.StreamRuns, "stream-runs", cfg.StreamRuns, "repetitions of stream.base64")
	fs.Int64Var(&cfg.ArchiveBytes, "archive-bytes", cfg.ArchiveBytes, "bytes of files in the tar of archive.up and archive.down")
	fs.IntVar(&cfg.HostileClients, "hostile-clients", cfg.HostileClients, "slow uploads, and as many streaming execs, of the hostile.* rows")
	fs.IntVar(&cfg.HostileUnauth, "hostile-unauth", cfg.HostileUnauth, "unauthenticated requests of the hostile.* rows' burst")
	fs.DurationVar(&cfg.HostileTime, "hostile-time", cfg.HostileTime, "how long each slow upload and streaming exec of the hostile.* rows lasts")
	fs.StringVar(&cfg.Only, "only", "", "run only the rows whose name matches this regexp (e.g. 'op\\.|load')")
	fs.StringVar(&cfg.Targets, "targets", "", "run only on the targets whose name matches this regexp (e.g. 'http')")
	fs.StringVar(&cfg.BrokerBin, "broker-bin", "", "use this broker binary instead of building ./cmd/broker")
	fs.StringVar(&cfg.BrokerLogLevel, "broker-log-level", cfg.BrokerLogLevel, "the broker's --log-level (its log goes to a file)")
	backends := fs.String("backends", strings.Join(cfg.Backends, ","), "comma-separated backends to measure: local, ssh (needs root and "+sshdPath+"), docker (needs the engine and "+dockerImage+"), kubernetes (needs the cluster in $WSB_KUBECONFIG)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Backends = nil
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Backends = append(cfg.Backends, b)
		}
	}
	if *quick {
		cfg = quickConfig(cfg, explicitFlags(fs))
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := run(ctx, cfg, logger, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		if rep == nil {
			return 1
		}
	}
	rep.WriteTable(stdout)
	if *jsonPath != "" {
		if err := rep.WriteJSON(*jsonPath); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	switch {
	case err != nil || len(rep.Failures) > 0:
		return 1
	case *strict && !rep.allPass():
		return 3
	}
	return 0
}

// explicitFlags names the flags given on the command line.
func explicitFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
