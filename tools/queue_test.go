package tools

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// slowResolver resolves through a fake workspace, optionally delaying
// chosen paths so a later call could overtake an earlier one.
type slowResolver struct {
	ws    *fakeWorkspace
	delay map[string]chan struct{} // path -> released when closed
}

func (r slowResolver) RealPath(ctx context.Context, p string) (string, error) {
	if ch, ok := r.delay[p]; ok {
		<-ch
	}
	return r.ws.RealPath(ctx, p)
}

func TestQueueSameFileRunsInCallOrder(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("f", "")
	release := make(chan struct{})
	// The first call's key resolution is slow; the second must still wait.
	q := NewMutationQueue(slowResolver{ws: ws, delay: map[string]chan struct{}{"/w/f": release}})
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		close(started)
		_ = q.Do(context.Background(), "/w/f", func() error {
			mu.Lock()
			order = append(order, 1)
			mu.Unlock()
			return nil
		})
	}()
	<-started
	time.Sleep(20 * time.Millisecond) // let call 1 reach RealPath
	go func() {
		defer wg.Done()
		_ = q.Do(context.Background(), "/w/./f", func() error {
			mu.Lock()
			order = append(order, 2)
			mu.Unlock()
			return nil
		})
	}()
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if !reflect.DeepEqual(order, []int{1, 2}) {
		t.Fatalf("order = %v, want [1 2]", order)
	}
	if q.size() != 0 {
		t.Errorf("%d idle entries left in the queue", q.size())
	}
}

func TestQueueSerializesOneFile(t *testing.T) {
	q := NewMutationQueue(nil)
	gate := make(chan struct{})
	holding := make(chan struct{})
	go func() { _ = q.Do(context.Background(), "/w/x", func() error { close(holding); <-gate; return nil }) }()
	<-holding

	const n = 20
	var mu sync.Mutex
	var order []int
	active, maxActive := 0, 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = q.Do(context.Background(), "/w/x", func() error {
				mu.Lock()
				active++
				maxActive = max(maxActive, active)
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				active--
				mu.Unlock()
				return nil
			})
		}()
		// The gate holds the file, so call i is registered once the
		// entry counts the holder plus i+1 waiters: the calls enter the
		// queue in loop order.
		waitUsers(t, q, "/w/x", i+2)
	}
	close(gate)
	wg.Wait()
	if maxActive != 1 {
		t.Errorf("%d holders ran at once on one file", maxActive)
	}
	for i := range n {
		if order[i] != i {
			t.Fatalf("order = %v, want 0..%d", order, n-1)
		}
	}
}

func waitUsers(t *testing.T, q *MutationQueue, key string, users int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		q.mu.Lock()
		n := 0
		if e := q.entries[key]; e != nil {
			n = e.users
		}
		q.mu.Unlock()
		if n >= users {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("queue never reached %d users", users)
}

func TestQueueDifferentFilesRunInParallel(t *testing.T) {
	q := NewMutationQueue(nil)
	inA, bDone := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- q.Do(context.Background(), "/w/a", func() error {
			close(inA)
			// Holds /w/a until /w/b has run, which proves parallelism.
			select {
			case <-time.After(5 * time.Second):
				return errors.New("b never ran while a was held")
			case <-bDone:
				return nil
			}
		})
	}()
	<-inA
	if err := q.Do(context.Background(), "/w/b", func() error { close(bDone); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestQueueSymlinkAliasSharesQueue(t *testing.T) {
	ws := newFakeWorkspace(t)
	ws.addFile("real.txt", "")
	ws.addSymlink("alias.txt", "real.txt")
	q := NewMutationQueue(ws)
	holding := make(chan struct{})
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- q.Do(context.Background(), "/w/real.txt", func() error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	ran := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		second <- q.Do(context.Background(), "/w/alias.txt", func() error { close(ran); return nil })
	}()
	select {
	case <-ran:
		t.Fatal("the alias ran while the real file was held")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	// A file that does not exist yet keys by its path.
	if err := q.Do(context.Background(), "/w/new/file", func() error { return nil }); err != nil {
		t.Fatalf("missing file: %v", err)
	}
}

func TestQueueResolverErrors(t *testing.T) {
	ws := newFakeWorkspace(t)
	boom := opsapi.E("fake.RealPath", "/w/x", opsapi.ErrUnavailable, fmt.Errorf("connection lost"))
	ws.failOn("RealPath", "/w/x", boom)
	q := NewMutationQueue(ws)
	ran := false
	err := q.Do(context.Background(), "/w/x", func() error { ran = true; return nil })
	if !errors.Is(err, opsapi.ErrUnavailable) || ran {
		t.Fatalf("err = %v ran = %v, want the resolver's error and fn not run", err, ran)
	}
	fnErr := errors.New("fn failed")
	if err := q.Do(context.Background(), "/w/y", func() error { return fnErr }); err != fnErr {
		t.Fatalf("fn's error not returned: %v", err)
	}
	if q.size() != 0 {
		t.Errorf("%d entries left after errors", q.size())
	}
}

func TestQueueAbortWhileWaiting(t *testing.T) {
	q := NewMutationQueue(nil)
	holding, release := make(chan struct{}), make(chan struct{})
	go func() { _ = q.Do(context.Background(), "/w/f", func() error { close(holding); <-release; return nil }) }()
	<-holding
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	ran := false
	go func() { errc <- q.Do(ctx, "/w/f", func() error { ran = true; return nil }) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errc; err == nil || err.Error() != "Operation aborted" || ran {
		t.Fatalf("err = %v ran = %v", err, ran)
	}
	// A third call must still wait for the first holder.
	third := make(chan struct{})
	go func() { _ = q.Do(context.Background(), "/w/f", func() error { close(third); return nil }) }()
	select {
	case <-third:
		t.Fatal("third call overtook the holder after an abort")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-third:
	case <-time.After(5 * time.Second):
		t.Fatal("third call never ran")
	}
}
