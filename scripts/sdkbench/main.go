package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
)

// result is the JSON every SDK bench prints.
type result struct {
	Read4KP50ms          float64  `json:"read4k_p50_ms"`
	TrueP50ms            float64  `json:"true_p50_ms"`
	DownloadRSSGrowthMiB *float64 `json:"download_rss_growth_mib"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sdkbench:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run() error {
	prepare := flag.Bool("prepare", false, "write the 4 KiB and the 1 GiB file, then exit")
	n := flag.Int("n", 300, "calls per figure")
	noDownload := flag.Bool("no-download", false, "skip the 1 GiB download")
	flag.Parse()
	wsID := os.Getenv("WSBROKER_BENCH_WS")
	if wsID == "" {
		return fmt.Errorf("WSBROKER_BENCH_WS names no workspace")
	}
	ctx := context.Background()
	c := client.New(env("BROKER_URL", client.DefaultURL), os.Getenv("BROKER_TOKEN"))
	ws := c.Workspace(wsID)
	small, big := env("WSBROKER_BENCH_READ", "bench-4k.bin"), env("WSBROKER_BENCH_BIG", "bench-1g.bin")
	if *prepare {
		return prepareFiles(ctx, ws, small, big)
	}
	var out result
	var err error
	if out.Read4KP50ms, err = p50(*n, func() error { return readAll(ctx, ws, small, nil) }); err != nil {
		return err
	}
	if out.TrueP50ms, err = p50(*n, func() error { return exec(ctx, ws, "true") }); err != nil {
		return err
	}
	if !*noDownload {
		g, err := downloadGrowth(ctx, ws, big)
		if err != nil {
			return err
		}
		out.DownloadRSSGrowthMiB = &g
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func prepareFiles(ctx context.Context, ws *client.Workspace, small, big string) error {
	b := make([]byte, 4096)
	_, _ = rand.Read(b)
	if err := ws.WriteFile(ctx, small, bytes.NewReader(b)); err != nil {
		return err
	}
	return exec(ctx, ws, "head -c 1073741824 /dev/zero > '"+big+"'")
}

func exec(ctx context.Context, ws *client.Workspace, cmd string) error {
	res, err := ws.Exec(ctx, opsapi.ExecRequest{Command: cmd, Output: io.Discard})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%q exited %d", cmd, res.ExitCode)
	}
	return err
}

// readAll reads path to its end, counting its bytes into n when given.
func readAll(ctx context.Context, ws *client.Workspace, path string, n *int64) error {
	rc, err := ws.Open(ctx, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	got, err := io.Copy(io.Discard, rc)
	if n != nil {
		*n = got
	}
	return err
}

// p50 is the median milliseconds of n calls of fn, after a warm-up.
func p50(n int, fn func() error) (float64, error) {
	for range max(n/10, 5) {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	times := make([]float64, 0, n)
	for range n {
		t := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		times = append(times, float64(time.Since(t).Microseconds())/1000)
	}
	slices.Sort(times)
	return math.Round(times[len(times)/2]*1000) / 1000, nil
}

func downloadGrowth(ctx context.Context, ws *client.Workspace, path string) (float64, error) {
	base, err := statusKiB("VmRSS")
	if err != nil {
		return 0, err
	}
	// Linux: 5 resets VmHWM to the current RSS.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, err
	}
	var n int64
	if err := readAll(ctx, ws, path, &n); err != nil {
		return 0, err
	}
	if n != 1<<30 {
		return 0, fmt.Errorf("%s: read %d bytes, want 1 GiB", path, n)
	}
	peak, err := statusKiB("VmHWM")
	return math.Round(float64(peak-base)/1024*10) / 10, err
}

func statusKiB(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/self/status has no %s", field)
}
