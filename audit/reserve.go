package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// DefaultReserve is the space the audit keeps allocated beside its file
// by default: room for some thousands of bounded records written while
// the filesystem it shares with workspaces is full.
const DefaultReserve = 4 << 20

// releaseChunk is the least the reserve gives back at a time, so a full
// filesystem costs one truncate per many records, not one per record.
const releaseChunk = 256 << 10

// reservePath is the reserve file of the audit file at path: hidden, and
// not named path.* (those are the rotated files).
func reservePath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"-reserve")
}

// openReserve opens (or creates) the reserve file and grows it towards
// want; a filesystem without room leaves it smaller (Ready grows it once
// there is room). It returns nil when want <= 0.
func (l *Log) openReserve(want int64) error {
	if want <= 0 {
		return nil
	}
	f, err := os.OpenFile(reservePath(l.path), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("audit: the space reserve: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: the space reserve: %w", err)
	}
	l.reserve, l.reserved = f, st.Size()
	if err := l.growReserve(want); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return nil
}

// growReserve allocates the reserve file up to want bytes: fallocate,
// or zeros written where the filesystem has no fallocate. Called with
// l.mu held (or before the Log is shared).
func (l *Log) growReserve(want int64) error {
	if l.reserve == nil || l.reserved >= want {
		return nil
	}
	err := allocate(l.reserve, want)
	if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		err = writeZeros(l.reserve, l.reserved, want)
	}
	if err != nil {
		// What was allocated before the failure is still reserve.
		if st, serr := l.reserve.Stat(); serr == nil {
			l.reserved = st.Size()
		}
		return fmt.Errorf("audit: growing the space reserve %s to %d bytes: %w", l.reserve.Name(), want, err)
	}
	l.reserved = want
	return nil
}

func writeZeros(f *os.File, from, to int64) error {
	buf := make([]byte, 64<<10)
	for off := from; off < to; {
		n := min(int64(len(buf)), to-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return f.Sync()
}

// releaseReserve gives back at least n bytes of the reserve (releaseChunk
// at least, all that is left at most) to the filesystem, for the audit's
// own records. It reports whether it released anything. Called with l.mu
// held.
func (l *Log) releaseReserve(n int64) bool {
	if l.reserve == nil || l.reserved == 0 {
		return false
	}
	keep := max(0, l.reserved-max(n, releaseChunk))
	if err := l.reserve.Truncate(keep); err != nil {
		l.logger.Error("audit: releasing the space reserve", "err", err)
		return false
	}
	l.logger.Warn("audit: the filesystem is full; writing into the space reserve",
		"released", l.reserved-keep, "left", keep)
	l.reserved = keep
	return true
}

// refillReserve grows the reserve back to its size when the filesystem
// has that much room above MinFree. Called with l.mu held.
func (l *Log) refillReserve(free int64) {
	want := l.opts.Reserve
	if l.reserve == nil || l.reserved >= want || free-(want-l.reserved) < max(l.opts.MinFree, 0) {
		return
	}
	if err := l.growReserve(want); err != nil {
		l.logger.Warn("audit: refilling the space reserve", "err", err)
		return
	}
	l.logger.Info("audit: the space reserve is whole again", "bytes", want)
}
