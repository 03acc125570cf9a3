package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestSmoke runs the whole harness in -quick mode with tiny sizes, so it
// keeps compiling and working. It checks that every row was measured on
// both targets without error, never the figures themselves.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the broker and runs every scenario for a few seconds")
	}
	testutil.RequireCommand(t, "go", "bash", "head", "base64", "rg")
	cfg := quickConfig(defaultConfig(), nil)
	cfg.Duration = 2 * time.Second
	cfg.OpTime = 20 * time.Millisecond
	cfg.Clients = 16
	cfg.ArchiveBytes = 3 << 20
	cfg.StreamBytes = 300 << 10 // past the tool's 50 KiB, so the output is truncated and counted
	cfg.BrokerLogLevel = "warn"
	cfg.HostileClients, cfg.HostileUnauth, cfg.HostileTime = 8, 50, time.Second
	// local/mcp starts one more broker and measures seven more rows, and
	// the wide rows seed 2,000 files on three targets; 180 s leaves a
	// loaded machine room.
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	var progress bytes.Buffer
	rep, err := run(ctx, cfg, testutil.Logger(t), &progress)
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		t.Error(f)
	}

	local := slices.DeleteFunc(slices.Clone(latencyOps), func(op string) bool { return op == opCreate || op == opCreateWarm }) // docker and kubernetes only
	want := append(append(local, loadRows()...), streamBase64)
	wantRaw := append(append([]string{opSearchWide, opReadDirWide}, loadMix...), append(loadRows(), streamBase64)...)
	wantHTTP := append(slices.Clone(want), hostileRows...) // the hostile load runs on the broker process only
	targets := map[string][]string{"local/raw": wantRaw, "local/in-process": want, "local/http": wantHTTP, "local/mcp": mcpRows}
	for target, want := range targets {
		for _, name := range want {
			r, ok := findRow(rep, name, target)
			switch {
			case !ok:
				t.Errorf("%s on %s: not measured", name, target)
			case r.Count == 0 || r.Errors != 0:
				t.Errorf("%s on %s: %d calls, %d errors (first: %s)", name, target, r.Count, r.Errors, r.FirstError)
			case r.P50 <= 0 || r.P50 > r.P90 || r.P90 > r.P99 || r.P99 > r.Max:
				t.Errorf("%s on %s: percentiles out of order: %+v", name, target, r.Stats)
			case r.PeakRSS <= 0:
				t.Errorf("%s on %s: no peak RSS", name, target)
			}
		}
	}
	if r, _ := findRow(rep, streamBase64, "local/http"); r.MBps <= 0 {
		t.Errorf("stream.base64 over HTTP: no output rate: %+v", r)
	}
	if r, _ := findRow(rep, loadMixed, "local/http"); r.Count < cfg.Clients {
		t.Errorf("load.mixed over HTTP: only %d calls from %d clients", r.Count, cfg.Clients)
	}

	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, s := range []string{"op.read-4k", "http/in-process", "in-process/raw", "mcp/http", "Targets", "p50 <= 0.5 ms", "broker peak RSS <= 64 MiB", "p50 / http p50 <= 1.5 x", "hostile.healthz", "lost execs = 0"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	t.Log("\n" + table.String())

	path := filepath.Join(t.TempDir(), "bench.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []jsonRow `json:"results"`
		Ratios  []Ratio   `json:"ratios"`
		Targets []Verdict `json:"targets"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &doc)
	}
	if err != nil {
		t.Fatal(err)
	}
	localGoals := 0
	for _, g := range goals() {
		if g.Backend == "local" {
			localGoals++
		}
	}
	// The sandbox target (root only) takes turns with local/http: one
	// ratio per row it measured.
	sandboxed := 0
	for _, r := range rep.Rows {
		if r.Target == "local/http+sandbox" {
			sandboxed++
		}
	}
	if n := len(want) + len(wantRaw) + len(mcpRows) + sandboxed; len(doc.Results) != len(rep.Rows) || len(doc.Ratios) != n || len(doc.Targets) != localGoals {
		t.Errorf("JSON report: %d results, %d ratios, %d targets; want %d, %d, %d",
			len(doc.Results), len(doc.Ratios), len(doc.Targets), len(rep.Rows), n, localGoals)
	}
}

func findRow(rep *Report, name, target string) (Row, bool) {
	for _, r := range rep.Rows {
		if r.Name == name && r.Target == target {
			return r, true
		}
	}
	return Row{}, false
}

// TestOnlyAndFlags checks -only's filtering and flag errors without
// running anything slow: only op.stat is measured, in-process and over
// HTTP.
func TestOnlyAndFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the broker")
	}
	var out, errOut bytes.Buffer
	if code := runMain([]string{"-only", "("}, &out, &errOut); code != 2 {
		t.Errorf("bad -only regexp: exit %d, want 2; stderr %s", code, errOut.String())
	}
	if code := runMain([]string{"-clients", "0"}, &out, &errOut); code != 2 {
		t.Errorf("-clients 0: exit %d, want 2", code)
	}
	out.Reset()
	errOut.Reset()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	code := runMain([]string{"-quick", "-only", `^op\.stat$`, "-op-time", "20ms", "-json", jsonPath, "-broker-log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, errOut.String(), out.String())
	}
	var doc struct {
		Results []jsonRow `json:"results"`
	}
	b, err := os.ReadFile(jsonPath)
	if err == nil {
		err = json.Unmarshal(b, &doc)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 3 || doc.Results[0].Via != ViaRaw || doc.Results[1].Via != ViaInProcess || doc.Results[2].Via != ViaHTTP {
		t.Errorf("-only ^op\\.stat$: results %+v", doc.Results)
	}
	for _, r := range doc.Results {
		if r.Name != opStat {
			t.Errorf("-only ^op\\.stat$ ran %s on %s", r.Name, r.Target)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var r Recorder
	start := time.Now()
	r.Start(start)
	for i := 100; i >= 1; i-- { // out of order on purpose
		r.Record(time.Duration(i)*time.Millisecond, nil)
	}
	r.Record(time.Millisecond, context.Canceled)
	r.Stop(start.Add(time.Second))
	st := r.Stats()
	if st.Count != 101 || st.Errors != 1 || st.FirstError != context.Canceled.Error() {
		t.Errorf("count %d errors %d first %q", st.Count, st.Errors, st.FirstError)
	}
	// 101 samples: 1 ms twice, then 2..100 ms.
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"p50", st.P50, 50 * time.Millisecond},
		{"p90", st.P90, 90 * time.Millisecond},
		{"p99", st.P99, 99 * time.Millisecond},
		{"max", st.Max, 100 * time.Millisecond},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if st.Throughput != 101 {
		t.Errorf("throughput %v/s, want 101/s", st.Throughput)
	}
}

// TestBase64Len compares the formula with GNU base64 itself.
func TestBase64Len(t *testing.T) {
	testutil.RequireCommand(t, "bash", "head", "base64", "wc")
	for _, n := range []int64{0, 1, 2, 3, 56, 57, 58, 114, 4096, 100_000} {
		out, err := exec.Command("bash", "-c", "head -c "+strconv.FormatInt(n, 10)+" /dev/zero | base64 | wc -c").Output()
		if err != nil {
			t.Fatal(err)
		}
		got, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if want := base64Len(n); got != want {
			t.Errorf("base64Len(%d) = %d, GNU base64 wrote %d", n, want, got)
		}
	}
}

// TestProcSampler measures this process while it touches 32 MiB and
// spins for 200 ms.
func TestProcSampler(t *testing.T) {
	s := StartSampler(os.Getpid(), time.Millisecond)
	buf := make([]byte, 32<<20)
	for i := range buf { // touch every page so it becomes resident
		buf[i] = byte(i)
	}
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		buf[0]++
	}
	u := s.Stop()
	if u.PeakRSS < int64(len(buf)) {
		t.Errorf("peak RSS %d bytes, below the %d bytes just touched", u.PeakRSS, len(buf))
	}
	// A spinning goroutine is on CPU most of the time even on a busy
	// machine; ticks are 10 ms.
	if u.CPU < 50*time.Millisecond {
		t.Errorf("CPU %v after spinning for 200 ms", u.CPU)
	}
	runtime.KeepAlive(buf)
}
