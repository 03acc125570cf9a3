package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// SpillDir is the directory the model is told bash's full-output files
// are in ("Full output: /wsbroker-output/bash-<hex>.log"). It is not a
// directory of the workspace: the files live on the broker's host, out of
// the workspace's tree (so ls, find, grep and git status show only the
// user's files, as with pi, whose files are in the host's temp dir), and
// only the read tool reaches them.
const SpillDir = "/wsbroker-output"

// DefaultMaxSpillBytes bounds the full-output files one workspace keeps on
// the broker's host, all files together: a few whole logs of a long build,
// which is what a model reads back, while 256 workspaces at the bound
// hold 8 GiB (a SpillBudget bounds them all together).
const DefaultMaxSpillBytes = 32 << 20

// SpillBudget bounds the full-output files of many toolboxes together (a
// broker's workspaces). A file that would go past it first evicts its own
// workspace's oldest files, then is cut, as at a workspace's own bound:
// one workspace never deletes another's. Nil is no bound.
type SpillBudget struct {
	mu   sync.Mutex
	max  int64
	used int64
}

// NewSpillBudget returns a budget of max bytes (at least 1).
func NewSpillBudget(max int64) *SpillBudget { return &SpillBudget{max: max} }

// Used is what the toolboxes' files hold now.
func (b *SpillBudget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// take reserves up to n bytes and says how many.
func (b *SpillBudget) take(n int64) int64 {
	if b == nil {
		return n
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, max(0, b.max-b.used))
	b.used += n
	return n
}

// give returns n bytes taken before.
func (b *SpillBudget) give(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// spillNameRE is the only shape of a full-output file's path: anything
// else (.., another directory) is never looked up in the store.
var spillNameRE = regexp.MustCompile(`^@?` + regexp.QuoteMeta(SpillDir) + `/(bash-[0-9a-f]{16}\.log)$`)

// spillName returns the file name when p names a full-output file.
func spillName(p string) (string, bool) {
	m := spillNameRE.FindStringSubmatch(p)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// spillStore keeps one workspace's full-output files in a private
// directory on the broker's host, made at the first spill and removed by
// close. Its size is bounded: a new file evicts the oldest ones while the
// store is over max, and a file that alone reaches max is cut there with
// a last line saying so.
type spillStore struct {
	base   string // parent of the store's directory; "" is os.TempDir()
	max    int64
	budget *SpillBudget // shared with other workspaces; nil: none

	mu     sync.Mutex
	dir    string
	files  []string // names, oldest first
	sizes  map[string]int64
	used   int64
	closed bool
}

func newSpillStore(base string, max int64, budget *SpillBudget) *spillStore {
	if max <= 0 {
		max = DefaultMaxSpillBytes
	}
	return &spillStore{base: base, max: max, budget: budget, sizes: map[string]int64{}}
}

// size is what the store's files hold.
func (s *spillStore) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

var errSpillClosed = errors.New("the workspace's full-output store is closed")

// create starts a new file; it returns the path the model is told and the
// writer, whose CloseWithError removes the file.
func (s *spillStore) create() (string, io.WriteCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", nil, errSpillClosed
	}
	if s.dir == "" {
		base := s.base
		if base == "" {
			base = os.TempDir()
		}
		dir, err := os.MkdirTemp(base, "wsbroker-spill-")
		if err != nil {
			return "", nil, fmt.Errorf("full-output store: %w", err)
		}
		s.dir = dir
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails
	name := "bash-" + hex.EncodeToString(id[:]) + ".log"
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("full-output store: %w", err)
	}
	s.files = append(s.files, name)
	s.sizes[name] = 0
	return SpillDir + "/" + name, &spillFile{s: s, f: f, name: name}, nil
}

// drop forgets the file at index i and removes it; s.mu is held.
func (s *spillStore) drop(i int) {
	name := s.files[i]
	s.files = append(s.files[:i], s.files[i+1:]...)
	s.used -= s.sizes[name]
	s.budget.give(s.sizes[name])
	delete(s.sizes, name)
	_ = os.Remove(filepath.Join(s.dir, name))
}

// canEvictFor says an older file than name can make way; s.mu is held.
func (s *spillStore) canEvictFor(name string) bool {
	return len(s.files) > 1 && s.files[0] != name
}

// grow accounts n more bytes to name and says how many of them fit: in
// the store's bound and in the shared budget, the oldest of the store's
// other files making way for it first.
func (s *spillStore) grow(name string, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sizes[name]; !ok {
		return 0 // evicted or closed while being written
	}
	n = min(n, max(0, s.max-s.sizes[name]))
	for s.used+n > s.max && s.canEvictFor(name) {
		s.drop(0)
	}
	got := s.budget.take(n)
	for got < n && s.canEvictFor(name) {
		s.drop(0)
		got += s.budget.take(n - got)
	}
	s.sizes[name] += got
	s.used += got
	return got
}

// open opens a full-output file by the path the model was told.
func (s *spillStore) open(name string) (io.ReadCloser, error) {
	s.mu.Lock()
	dir := s.dir
	_, ok := s.sizes[name]
	s.mu.Unlock()
	if !ok || dir == "" {
		return nil, &os.PathError{Op: "open", Path: SpillDir + "/" + name, Err: os.ErrNotExist}
	}
	return os.Open(filepath.Join(dir, name))
}

// close removes every file and the directory; later spills fail.
func (s *spillStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.budget.give(s.used)
	s.files, s.sizes, s.used = nil, map[string]int64{}, 0
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.dir = ""
	return err
}

// spillCutNotice ends a file that reached the store's bound.
const spillCutNotice = "\n[wsbroker: the rest of the output was not saved: the workspace's full-output files reached their size limit]\n"

// spillFile is one file being written.
type spillFile struct {
	s    *spillStore
	f    *os.File
	name string
	cut  bool
}

// Write never blocks on anything but the broker's own disk; past the
// store's bound it drops the bytes, once noting it in the file.
func (w *spillFile) Write(p []byte) (int, error) {
	if w.cut {
		return len(p), nil
	}
	n := w.s.grow(w.name, int64(len(p)))
	if _, err := w.f.Write(p[:n]); err != nil {
		return 0, err
	}
	if n < int64(len(p)) {
		w.cut = true
		_, _ = io.WriteString(w.f, spillCutNotice)
	}
	return len(p), nil
}

func (w *spillFile) Close() error { return w.f.Close() }

// CloseWithError drops the file: the accumulator forgets its path.
func (w *spillFile) CloseWithError(error) error {
	_ = w.f.Close()
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	for i, n := range w.s.files {
		if n == w.name {
			w.s.drop(i)
			break
		}
	}
	return nil
}
