package bgproc

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func newTestRing(t *testing.T, size int64) *Ring {
	t.Helper()
	r, err := NewRing(filepath.Join(t.TempDir(), "log"), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Remove() })
	return r
}

// readAll reads from off to the end written so far.
func readAll(t *testing.T, r *Ring, off int64) (data []byte, from int64) {
	t.Helper()
	buf := make([]byte, 7) // small, so reads cross the wrap
	from = -1
	for {
		n, at, err := r.ReadAt(buf, off)
		if err != nil {
			t.Fatal(err)
		}
		if from < 0 {
			from = at
		}
		if n == 0 {
			return data, from
		}
		data = append(data, buf[:n]...)
		off = at + int64(n)
	}
}

func TestRingKeepsTheLastSizeBytesAndSaysWhatWasDropped(t *testing.T) {
	r := newTestRing(t, 16)
	var all []byte
	for i := range 10 {
		chunk := bytes.Repeat([]byte{byte('a' + i)}, 5)
		all = append(all, chunk...)
		if _, err := r.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	data, from := readAll(t, r, 0)
	if from != 50-16 {
		t.Fatalf("read from 0 started at %d, want %d (the bytes before were dropped)", from, 50-16)
	}
	if !bytes.Equal(data, all[34:]) {
		t.Fatalf("got %q, want %q", data, all[34:])
	}
	// A reader inside the held span resumes exactly where it was.
	data, from = readAll(t, r, 40)
	if from != 40 || !bytes.Equal(data, all[40:]) {
		t.Fatalf("from 40: got %q at %d, want %q", data, from, all[40:])
	}
	if sp := r.Span(); sp.First != 34 || sp.Written != 50 {
		t.Fatalf("span %+v, want first 34, written 50", sp)
	}
}

func TestRingWriteLargerThanTheRingKeepsItsTail(t *testing.T) {
	r := newTestRing(t, 8)
	if _, err := r.Write([]byte("0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	data, from := readAll(t, r, 3)
	if from != 8 || string(data) != "89abcdef" {
		t.Fatalf("got %q from %d, want \"89abcdef\" from 8", data, from)
	}
}

func TestRingWaitWakesOnWriteAndEndsAtClose(t *testing.T) {
	r := newTestRing(t, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	woke := make(chan error, 1)
	go func() { woke <- r.Wait(ctx, 0) }()
	time.Sleep(20 * time.Millisecond)
	if _, err := r.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("Wait after a write: %v", err)
	}
	go func() { woke <- r.Wait(ctx, 1) }()
	r.CloseWrite()
	if err := <-woke; !errors.Is(err, errClosed) {
		t.Fatalf("Wait at the end of a closed ring: %v, want errClosed", err)
	}
	short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stop()
	if err := (newTestRing(t, 8)).Wait(short, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a quiet ring: %v, want the context's deadline", err)
	}
}

// A reader racing a writer that wraps over it never returns bytes other
// than the ones written at the offsets it reports.
func TestRingReadsRacingTheWriterAreNeverTorn(t *testing.T) {
	r := newTestRing(t, 64)
	const total = 1 << 20
	// Byte at offset i is i mod 251: any torn read shows.
	go func() {
		buf := make([]byte, 37)
		for off := 0; off < total; off += len(buf) {
			for i := range buf {
				buf[i] = byte((off + i) % 251)
			}
			_, _ = r.Write(buf)
		}
		r.CloseWrite()
	}()
	buf := make([]byte, 29)
	off := int64(0)
	ctx := context.Background()
	for {
		n, from, err := r.ReadAt(buf, off)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if want := byte((from + int64(i)) % 251); buf[i] != want {
				t.Fatalf("byte at %d is %d, want %d", from+int64(i), buf[i], want)
			}
		}
		off = from + int64(n)
		if n == 0 {
			if err := r.Wait(ctx, off); errors.Is(err, errClosed) {
				break
			}
		}
	}
}
