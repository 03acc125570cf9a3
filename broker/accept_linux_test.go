package broker_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingListener counts Accept calls, failed ones included.
type countingListener struct {
	net.Listener
	calls, failed atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	l.calls.Add(1)
	c, err := l.Listener.Accept()
	if err != nil {
		l.failed.Add(1)
	}
	return c, err
}

// TestAcceptErrorsDoNotSpin: with the descriptor table really full, a
// waiting connection makes every accept fail with EMFILE; Serve retries
// with a back-off (a handful of tries a second, not a busy loop) and
// serves the connection once descriptors are free again. Not parallel:
// the limit is the whole test process's.
func TestAcceptErrorsDoNotSpin(t *testing.T) {
	e := newEnv(t, nil)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: inner}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	waitFor(t, func() bool { return ln.calls.Load() >= 1 }) // Serve is accepting
	fill, spare := fillDescriptors(t)
	spare() // the client's socket takes the one descriptor left
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, func() bool { return ln.failed.Load() >= 1 })
	before := ln.calls.Load()
	time.Sleep(500 * time.Millisecond)
	if n := ln.calls.Load() - before; n > 50 {
		t.Errorf("%d accepts in 500 ms with the descriptor table full: the accept loop spins", n)
	}
	fill()

	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the waiting connection was not served once descriptors were free: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
}

// fillDescriptors lowers this process's descriptor limit to a few above
// what it uses and opens files until none is left. release frees them and
// restores the limit; spare frees one.
func fillDescriptors(t *testing.T) (release, spare func()) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	low := old
	low.Cur = uint64(len(entries) + 16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	release = func() {
		for _, f := range files {
			f.Close()
		}
		files = nil
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
	}
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			release()
			t.Fatal(err)
		}
		files = append(files, f)
		if len(files) > 1<<16 {
			release()
			t.Fatal("no EMFILE after 65536 files")
		}
	}
	t.Cleanup(release)
	spare = func() {
		files[len(files)-1].Close()
		files = files[:len(files)-1]
	}
	return release, spare
}
