package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// maxLine bounds one line read back (records are bounded far below it).
const maxLine = 16 << 20

// eachLineReverse calls fn with each non-empty line of the file, last
// line first, reading the file backwards in chunks; it stops when fn
// returns true. The line is only valid during the call.
func eachLineReverse(name string, fn func(line []byte) (stop bool)) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	const chunk = 64 << 10
	var tail []byte // the start of the line cut by the chunk boundary
	for end := st.Size(); end > 0; {
		start := max(0, end-chunk)
		data := make([]byte, int(end-start), int(end-start)+len(tail))
		if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", name, err)
		}
		data = append(data, tail...)
		for {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 {
				break
			}
			if line := data[i+1:]; len(bytes.TrimSpace(line)) > 0 && fn(line) {
				return nil
			}
			data = data[:i]
		}
		if len(data) > maxLine {
			return fmt.Errorf("%s: a line longer than %d bytes ends at offset %d", name, maxLine, end)
		}
		tail, end = data, start
	}
	if len(bytes.TrimSpace(tail)) > 0 {
		fn(tail)
	}
	return nil
}

// cutTail is what cutTornTail removed.
type cutTail struct {
	file   string
	n      int64
	digest string
}

// cutTornTail cuts off bytes after the file's last newline: a record
// whose write was cut short (a full disk, a crash). It returns nil when
// the file ends with a newline, is empty or does not exist.
func cutTornTail(name string) (*cutTail, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	size := st.Size()
	last := make([]byte, 1)
	if size == 0 {
		return nil, nil
	}
	if _, err := f.ReadAt(last, size-1); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if last[0] == '\n' {
		return nil, nil
	}
	// Find the last newline, reading backwards.
	keep := int64(0)
	buf := make([]byte, 64<<10)
	for end := size; end > 0 && keep == 0; {
		start := max(0, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			keep = start + int64(i) + 1
		}
		end = start
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, keep, size-keep)); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := f.Truncate(keep); err != nil {
		return nil, fmt.Errorf("audit: cutting the torn last record of %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &cutTail{file: name, n: size - keep, digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}

// prune deletes the oldest rotated files until at most MaxFiles remain
// and they hold at most MaxTotalBytes. The current file is never
// deleted. Called with l.mu held.
func (l *Log) prune() {
	if l.opts.MaxFiles <= 0 && l.opts.MaxTotalBytes <= 0 {
		return
	}
	files, err := l.files()
	if err != nil {
		l.logger.Error("audit retention: listing rotated files", "err", err)
		return
	}
	rotated := files[:len(files)-1] // oldest first
	sizes := make([]int64, len(rotated))
	var total int64
	for i, name := range rotated {
		if st, err := os.Stat(name); err == nil {
			sizes[i] = st.Size()
			total += sizes[i]
		}
	}
	for i, name := range rotated {
		over := (l.opts.MaxFiles > 0 && len(rotated)-i > l.opts.MaxFiles) ||
			(l.opts.MaxTotalBytes > 0 && total > l.opts.MaxTotalBytes)
		if !over {
			return
		}
		if err := os.Remove(name); err != nil {
			l.logger.Error("audit retention: deleting a rotated file", "file", name, "err", err)
			return
		}
		total -= sizes[i]
		l.logger.Info("audit retention: deleted a rotated file", "file", name, "bytes", sizes[i])
	}
}

// freeBytes is the space available to unprivileged users on f's
// filesystem.
func freeBytes(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:gosec,unconvert // block counts fit in int64; Bsize is int64 on Linux, uint32 on macOS
}
