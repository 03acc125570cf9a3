package tools

import (
	"context"
	"errors"
	"sync"

	"github.com/wsbroker/wsbroker/opsapi"
)

// MutationQueue serializes file mutations per file, as pi's
// withFileMutationQueue (≥0.75.5) does: calls on one file run one at a time
// in the order Do was called, calls on different files run in parallel, and
// symlink aliases of one file share a queue because the key is the file's
// canonical path.
type MutationQueue struct {
	resolver opsapi.Resolver // nil: key by the resolved path

	// reg serializes key resolution and enqueueing, so that a slow
	// RealPath cannot let a later call overtake an earlier one.
	reg chan struct{}

	mu      sync.Mutex
	entries map[string]*queueEntry
}

type queueEntry struct {
	tail  chan struct{} // closed when the last enqueued holder is done
	users int           // holders and waiters; the entry goes at zero
}

// NewMutationQueue returns an empty queue that keys files with resolver's
// RealPath when resolver is not nil.
func NewMutationQueue(resolver opsapi.Resolver) *MutationQueue {
	return &MutationQueue{
		resolver: resolver,
		reg:      make(chan struct{}, 1),
		entries:  map[string]*queueEntry{},
	}
}

// Do runs fn once every earlier Do on the same file has finished. path is
// an absolute, cleaned workspace path; its key is the resolver's RealPath,
// or path itself when the file (or a parent) does not exist yet. Other
// RealPath errors are returned without running fn.
//
// When ctx ends while waiting, Do returns "Operation aborted" without
// running fn; the queue order of later calls is kept. Once fn runs, Do
// waits for it: fn itself must watch ctx.
func (q *MutationQueue) Do(ctx context.Context, path string, fn func() error) error {
	select {
	case q.reg <- struct{}{}:
	case <-ctx.Done():
		return errAborted
	}
	key, err := q.key(ctx, path)
	if err != nil {
		<-q.reg
		return err
	}
	prev, done := q.enqueue(key)
	<-q.reg

	release := func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		close(done)
		e := q.entries[key]
		e.users--
		if e.users == 0 {
			delete(q.entries, key)
		}
	}
	select {
	case <-prev:
	case <-ctx.Done():
		// Keep our place in the chain: release only after the holder
		// before us, so the one after us never runs concurrently with it.
		go func() {
			<-prev
			release()
		}()
		return errAborted
	}
	defer release()
	return fn()
}

func (q *MutationQueue) key(ctx context.Context, path string) (string, error) {
	if q.resolver == nil {
		return path, nil
	}
	real, err := q.resolver.RealPath(ctx, path)
	switch {
	case err == nil:
		return real, nil
	case errors.Is(err, opsapi.ErrNotExist), errors.Is(err, opsapi.ErrNotDir):
		return path, nil
	case ctx.Err() != nil:
		return "", errAborted
	}
	// Shown to the model as Node's realpath failure would be.
	return "", nodeErr(err, "realpath", path)
}

// enqueue appends a holder for key and returns the channel to wait on and
// the channel to close when done.
func (q *MutationQueue) enqueue(key string) (prev, done chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	done = make(chan struct{})
	e, ok := q.entries[key]
	if !ok {
		prev = make(chan struct{})
		close(prev)
		e = &queueEntry{}
		q.entries[key] = e
	} else {
		prev = e.tail
	}
	e.tail = done
	e.users++
	return prev, done
}

// size reports how many files have queued work (for tests).
func (q *MutationQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.entries)
}

// lockFile runs fn under the workspace's mutation queue for absPath; write
// and edit wrap their whole read-modify-write in it.
func (e *toolEnv) lockFile(ctx context.Context, absPath string, fn func() error) error {
	return e.queue.Do(ctx, absPath, fn)
}
