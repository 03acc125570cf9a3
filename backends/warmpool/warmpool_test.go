package warmpool_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/warmpool"
)

// TestFillTakeRefill: the filler makes members up to the size, a take
// wakes it to make another, dead members are discarded, and a member
// that does not fit is removed rather than blocking the filler.
func TestFillTakeRefill(t *testing.T) {
	p := warmpool.New[int](2)
	var made, failed atomic.Int64
	var removed atomic.Int64
	mk := func(context.Context) (int, error) {
		if failed.Add(1) == 1 {
			return 0, errors.New("the first one fails")
		}
		return int(made.Add(1)), nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		p.Fill(ctx, mk, func(int) { removed.Add(1) }, 10*time.Millisecond, slog.New(slog.DiscardHandler))
		close(done)
	}()
	waitReady := func(n int) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); p.Ready() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("ready %d, want %d", p.Ready(), n)
			}
		}
	}
	waitReady(2)
	var discarded []int
	m, ok := p.Take(func(m int) bool { return m != 1 }, func(m int) { discarded = append(discarded, m) })
	if !ok || m != 2 || len(discarded) != 1 || discarded[0] != 1 {
		t.Fatalf("take: %d %t, discarded %v", m, ok, discarded)
	}
	waitReady(2)
	if p.Put(m) {
		t.Error("Put into a full pool")
	}
	cancel()
	<-done
	if made.Load() != 4 {
		t.Errorf("made %d members, want 4 (two, then two for the taken and the discarded)", made.Load())
	}
	if removed.Load() != 0 {
		t.Errorf("removed %d members the filler made, want none", removed.Load())
	}
}

// TestTakeFromEmpty: nothing ready is not an error, and wakes no one.
func TestTakeFromEmpty(t *testing.T) {
	p := warmpool.New[string](1)
	if _, ok := p.Take(func(string) bool { return true }, func(string) {}); ok {
		t.Error("took from an empty pool")
	}
	if st := p.Status("x"); st.Name != "x" || st.Size != 1 || st.Ready != 0 {
		t.Errorf("status %+v", st)
	}
}

func TestCheck(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z]+$`).MatchString
	errs := warmpool.Check([]warmpool.Spec{{Name: "a"}, {Name: "a", Size: 1}, {Name: "B B", Size: 65}, {Name: "ok", Size: 64}}, valid)
	got := errors.Join(errs...).Error()
	for _, want := range []string{"pools[0] (a): size 0", `pools[1]: name "a" must be unique`, `pools[2]: name "B B"`, "pools[2] (B B): size 65"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d problems, want 4: %v", len(errs), errs)
	}
}

// TestFillRemovesWhatDoesNotFit: a member made while another was given
// back into the last free place is removed, and the filler goes on.
func TestFillRemovesWhatDoesNotFit(t *testing.T) {
	p := warmpool.New[int](1)
	making, release := make(chan struct{}), make(chan struct{})
	removed := make(chan int, 1)
	mk := func(context.Context) (int, error) {
		close(making)
		<-release
		return 7, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go p.Fill(ctx, mk, func(m int) { removed <- m }, time.Second, slog.New(slog.DiscardHandler))
	<-making
	if !p.Put(1) {
		t.Fatal("the pool had no room for a member given back")
	}
	close(release)
	select {
	case m := <-removed:
		if m != 7 {
			t.Errorf("removed %d, want the member that did not fit", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the member that did not fit was never removed (the filler blocked?)")
	}
}
