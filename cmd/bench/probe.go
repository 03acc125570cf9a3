package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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
// harness closes it), and as often a bare net/http server it serves
// itself: a server that does nothing, on the same machine at the same
// moments, says how much of the broker's latency is the machine's (these
// machines are shared). Then it writes one line per probe: "broker" or
// "bare", the latency in nanoseconds counted from when the probe was due
// (a stalled server is charged for the probes queued behind the stall),
// and the error if any. The first line, "ready", is written once a first
// probe of each has answered.
func runProbe(base string, in io.Reader, out io.Writer) int {
	bare, err := serveBare()
	if err != nil {
		fmt.Fprintln(out, "error", err)
		return 1
	}
	targets := map[string]string{"broker": base, "bare": bare}
	ctx := context.Background()
	clients := map[string]*http.Client{}
	for name, url := range targets {
		clients[name] = newLoopbackClient(probePeer, 1)
		clients[name].Timeout = 10 * time.Second
		if err := getHealthz(ctx, clients[name], url); err != nil {
			fmt.Fprintln(out, "error", err)
			return 1
		}
	}
	fmt.Fprintln(out, "ready")
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(done)
	}()
	var mu sync.Mutex
	w := bufio.NewWriter(out)
	var wg sync.WaitGroup
	start := time.Now()
	for name, url := range targets {
		wg.Go(func() {
			for _, s := range probeEvery(ctx, clients[name], url, start, done) {
				mu.Lock()
				fmt.Fprintf(w, "%s %d%s\n", name, s.lat, s.msg)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if w.Flush() != nil {
		return 1
	}
	return 0
}

type probeSample struct {
	lat time.Duration
	msg string // " error", or empty
}

// probeEvery asks url+"/healthz" every healthzEvery from start until done.
func probeEvery(ctx context.Context, hc *http.Client, url string, start time.Time, done <-chan struct{}) []probeSample {
	var samples []probeSample
	for k := 0; ; k++ {
		due := start.Add(time.Duration(k) * healthzEvery)
		select {
		case <-done:
			return samples
		case <-time.After(time.Until(due)):
		}
		s := probeSample{}
		if err := getHealthz(ctx, hc, url); err != nil {
			s.msg = " " + oneLine(err.Error())
		}
		s.lat = time.Since(due)
		samples = append(samples, s)
	}
}

// serveBare serves /healthz as the broker does and nothing else, and
// returns its base URL.
func serveBare() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
		}))
	}()
	return "http://" + ln.Addr().String(), nil
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

// stop ends the probe and records its samples of the broker in broker,
// those of the bare server in bare.
func (p *probeProcess) stop(broker, bare *Recorder) error {
	_ = p.stdin.Close()
	for p.lines.Scan() {
		f := strings.SplitN(p.lines.Text(), " ", 3)
		var n int64
		err := errors.New("too short")
		if len(f) >= 2 {
			n, err = strconv.ParseInt(f[1], 10, 64)
		}
		rec := map[string]*Recorder{"broker": broker, "bare": bare}[f[0]]
		if err != nil || rec == nil {
			return errors.Join(fmt.Errorf("the probe wrote %q", p.lines.Text()), p.cmd.Wait())
		}
		var perr error
		if len(f) == 3 {
			perr = errors.New(f[2])
		}
		rec.Record(time.Duration(n), perr)
	}
	return errors.Join(p.lines.Err(), p.cmd.Wait())
}
