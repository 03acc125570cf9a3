package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The /healthz probe of the hostile scenario runs as a process of its own
// (this binary, re-executed with probeEnv set), as a load balancer's
// health check would: in the harness it would share a Go scheduler with
// hundreds of busy client goroutines, and their queueing, not the
// broker's, would show in its latency.
const probeEnv = "WSBROKER_BENCH_PROBE_URL"

// init takes the process over when it was started as the probe, before
// main (or a test binary's TestMain) runs.
func init() {
	if base := os.Getenv(probeEnv); base != "" {
		os.Exit(runProbe(base, os.Stdin, os.Stdout))
	}
}

// runProbe asks base+"/healthz" every healthzEvery until in ends (the
// harness closes it), then writes one line per probe: its latency in
// nanoseconds, counted from when it was due (a stalled broker is charged
// for the probes queued behind the stall), and its error if any. The
// first line, "ready", is written once a first probe has answered.
func runProbe(base string, in io.Reader, out io.Writer) int {
	hc := newLoopbackClient(probePeer, 1)
	hc.Timeout = 10 * time.Second
	ctx := context.Background()
	if err := getHealthz(ctx, hc, base); err != nil {
		fmt.Fprintln(out, "error", err)
		return 1
	}
	fmt.Fprintln(out, "ready")
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(done)
	}()
	type sample struct {
		lat time.Duration
		err error
	}
	var samples []sample
	start := time.Now()
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * healthzEvery)
		select {
		case <-done:
			w := bufio.NewWriter(out)
			for _, s := range samples {
				msg := ""
				if s.err != nil {
					msg = " " + oneLine(s.err.Error())
				}
				fmt.Fprintf(w, "%d%s\n", s.lat, msg)
			}
			if w.Flush() != nil {
				return 1
			}
			return 0
		case <-time.After(time.Until(due)):
		}
		err := getHealthz(ctx, hc, base)
		samples = append(samples, sample{time.Since(due), err})
	}
}

func getHealthz(ctx context.Context, hc *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(b) != "ok\n" {
		return fmt.Errorf("/healthz: %s %q", resp.Status, b)
	}
	return nil
}

// probeProcess is a running probe.
type probeProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// startProbe starts the probe on base and waits until it is ready.
func startProbe(ctx context.Context, base string) (*probeProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the probe: %w", err)
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), probeEnv+"="+base)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the probe: %w", err)
	}
	p := &probeProcess{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	if !p.lines.Scan() || p.lines.Text() != "ready" {
		return nil, errors.Join(fmt.Errorf("the probe did not start: %q", p.lines.Text()), p.cmd.Wait())
	}
	return p, nil
}

// stop ends the probe and records its samples in rec.
func (p *probeProcess) stop(rec *Recorder) error {
	_ = p.stdin.Close()
	for p.lines.Scan() {
		lat, msg, _ := strings.Cut(p.lines.Text(), " ")
		n, err := strconv.ParseInt(lat, 10, 64)
		if err != nil {
			return errors.Join(fmt.Errorf("the probe wrote %q", p.lines.Text()), p.cmd.Wait())
		}
		var perr error
		if msg != "" {
			perr = errors.New(msg)
		}
		rec.Record(time.Duration(n), perr)
	}
	return errors.Join(p.lines.Err(), p.cmd.Wait())
}
