package execpump_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
)

func baseConfig(out io.Writer) execpump.Config {
	return execpump.Config{
		Output:    out,
		DrainIdle: 50 * time.Millisecond,
		MaxDrain:  time.Second,
		Kill:      func() int { return 0 },
	}
}

func exited(code int) execpump.Event {
	return execpump.Event{Exited: true, Status: &execpump.Status{Code: code}}
}

func TestOutputThenExit(t *testing.T) {
	pr, pw := io.Pipe()
	events := make(chan execpump.Event, 1)
	go func() {
		_, _ = pw.Write([]byte("hello "))
		_, _ = pw.Write([]byte("world"))
		pw.Close()
		events <- exited(3)
	}()
	var out bytes.Buffer
	res, err := execpump.Run(context.Background(), pr, events, baseConfig(&out))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello world" || res.ExitCode != 3 || !res.StatusKnown || res.TimedOut || res.Canceled {
		t.Fatalf("got %q %+v", out.String(), res)
	}
}

// A silent background holder of the output releases the call after
// DrainIdle; output it writes before that is kept.
func TestDrainIdleReleasesSilentHolder(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	events := make(chan execpump.Event, 1)
	events <- exited(0)
	go func() {
		time.Sleep(10 * time.Millisecond)
		_, _ = pw.Write([]byte("late"))
	}()
	var out bytes.Buffer
	cfg := baseConfig(&out)
	cfg.Close = func() { pr.Close() }
	begin := time.Now()
	if _, err := execpump.Run(context.Background(), pr, events, cfg); err != nil {
		t.Fatal(err)
	}
	if out.String() != "late" {
		t.Errorf("output %q, want the late chunk", out.String())
	}
	if d := time.Since(begin); d > 500*time.Millisecond {
		t.Errorf("took %v, want about DrainIdle", d)
	}
}

// A holder that never stops writing is cut at MaxDrain (DrainIdle is
// made long so that a loaded machine's scheduling gaps cannot end it).
func TestMaxDrainCapsChattyHolder(t *testing.T) {
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				pw.Close()
				return
			default:
				_, _ = pw.Write([]byte("x"))
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	events := make(chan execpump.Event, 1)
	events <- exited(0)
	cfg := baseConfig(io.Discard)
	cfg.DrainIdle = time.Minute
	cfg.MaxDrain = 200 * time.Millisecond
	cfg.Close = func() { pr.Close() }
	begin := time.Now()
	if _, err := execpump.Run(context.Background(), pr, events, cfg); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("took %v, want about MaxDrain", d)
	}
}

func TestTimeoutKillsOnce(t *testing.T) {
	pr, pw := io.Pipe()
	events := make(chan execpump.Event, 1)
	var kills atomic.Int32
	cfg := baseConfig(io.Discard)
	cfg.Timeout = 20 * time.Millisecond
	cfg.Kill = func() int {
		kills.Add(1)
		pw.Close()
		events <- exited(143)
		return 2
	}
	res, err := execpump.Run(context.Background(), pr, events, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Killed != 2 || res.ExitCode != 143 || kills.Load() != 1 {
		t.Fatalf("got %+v after %d kills", res, kills.Load())
	}
}

func TestCancelKills(t *testing.T) {
	pr, pw := io.Pipe()
	events := make(chan execpump.Event, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := baseConfig(io.Discard)
	cfg.Kill = func() int {
		pw.Close()
		events <- execpump.Event{Exited: true}
		return 1
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	res, err := execpump.Run(ctx, pr, events, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Canceled || res.Killed != 1 || res.StatusKnown {
		t.Fatalf("got %+v", res)
	}
}

// A command that survives its kill is abandoned after GiveUp.
func TestGiveUpAbandons(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	cfg := baseConfig(io.Discard)
	cfg.Timeout = 10 * time.Millisecond
	cfg.GiveUp = 50 * time.Millisecond
	cfg.Close = func() { pr.Close() }
	res, err := execpump.Run(context.Background(), pr, make(chan execpump.Event), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Abandoned || !res.TimedOut {
		t.Fatalf("got %+v", res)
	}
}

func TestEventErr(t *testing.T) {
	errNoDir := errors.New("no such directory")
	pr, pw := io.Pipe()
	defer pw.Close()
	events := make(chan execpump.Event, 1)
	events <- execpump.Event{Err: errNoDir}
	cfg := baseConfig(io.Discard)
	cfg.Close = func() { pr.Close() }
	if _, err := execpump.Run(context.Background(), pr, events, cfg); !errors.Is(err, errNoDir) {
		t.Fatalf("err = %v, want %v", err, errNoDir)
	}
}

// A non-fatal error while a kill runs is left to the kill's outcome.
func TestEventErrIgnoredDuringKill(t *testing.T) {
	pr, pw := io.Pipe()
	events := make(chan execpump.Event, 2)
	release := make(chan struct{})
	cfg := baseConfig(io.Discard)
	cfg.Timeout = 10 * time.Millisecond
	cfg.Kill = func() int {
		events <- execpump.Event{Err: errors.New("late cwd error")}
		<-release
		return 1
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		pw.Close()
		events <- exited(137)
		close(release)
	}()
	res, err := execpump.Run(context.Background(), pr, events, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 {
		t.Fatalf("got %+v", res)
	}
}

// A failing Output stops the writes, not the reading.
func TestFailingOutputKeepsDraining(t *testing.T) {
	pr, pw := io.Pipe()
	events := make(chan execpump.Event, 1)
	go func() {
		for range 10 {
			_, _ = pw.Write([]byte("chunk"))
		}
		pw.Close()
		events <- exited(0)
	}()
	w := &failingWriter{}
	if _, err := execpump.Run(context.Background(), pr, events, baseConfig(w)); err != nil {
		t.Fatal(err)
	}
	if w.calls != 1 {
		t.Errorf("Output written %d times, want once", w.calls)
	}
}

type failingWriter struct{ calls int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.calls++
	return 0, errors.New("gone")
}
