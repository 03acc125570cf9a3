package execpump_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/execpump"
)

// slowWriter is a caller that reads the output slowly: each Write blocks
// for delay.
type slowWriter struct {
	delay time.Duration
	buf   bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	return w.buf.Write(p)
}

// Output already in the pipe when the command exits reaches a caller that
// takes longer than MaxDrain to accept it: the time spent waiting for the
// caller is the caller's, not the command's draining. (Before, MaxDrain
// ran from the exit on and cut such output: an exec over HTTP whose
// client read slowly lost its tail.)
func TestSlowCallerLosesNothing(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := make([]byte, 384<<10) // 12 reads of the pump's 32 KiB
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() {
		_, _ = pw.Write(want)
		pw.Close()
	}()
	events := make(chan execpump.Event, 1)
	events <- exited(0) // the shell is gone; its output is still in the pipe
	out := &slowWriter{delay: 25 * time.Millisecond}
	cfg := baseConfig(out)
	cfg.MaxDrain = 100 * time.Millisecond // far below the 12 x 25 ms the caller takes
	if _, err := execpump.Run(context.Background(), pr, events, cfg); err != nil {
		t.Fatal(err)
	}
	if got := out.buf.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("the caller got %d of the %d bytes written before the exit", len(got), len(want))
	}
}

// stalledReader hands out "A", then stalls before handing out "B" while
// its source says B is waiting: a reader goroutine that is not scheduled
// (a loaded machine) although the pipe holds output.
type stalledReader struct {
	reads    int
	stall    time.Duration
	returned atomic.Bool // B is out
}

func (r *stalledReader) Read(p []byte) (int, error) {
	r.reads++
	switch r.reads {
	case 1:
		return copy(p, "A"), nil
	case 2:
		time.Sleep(r.stall)
		r.returned.Store(true)
		return copy(p, "B"), nil
	}
	return 0, io.EOF
}

// Output the backend still holds unread (Config.Pending) is not silence:
// the quiet period that ends a call after the exit starts only once
// there is none. (Before, a reader that was not scheduled for DrainIdle
// lost what the pipe held.)
func TestPendingOutputIsNotSilence(t *testing.T) {
	r := &stalledReader{stall: 300 * time.Millisecond}
	events := make(chan execpump.Event, 1)
	events <- exited(0)
	var out bytes.Buffer
	cfg := baseConfig(&out)
	cfg.DrainIdle = 20 * time.Millisecond // far below the stall
	cfg.Pending = func() int {
		if r.returned.Load() {
			return 0
		}
		return 1
	}
	if _, err := execpump.Run(context.Background(), r, events, cfg); err != nil {
		t.Fatal(err)
	}
	if out.String() != "AB" {
		t.Fatalf("output %q, want AB", out.String())
	}
}
