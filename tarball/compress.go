package tarball

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression names a stream's compression.
type Compression string

// Compressions.
const (
	None Compression = "none"
	Gzip Compression = "gzip"
	Zstd Compression = "zstd"
	// Auto, for Extract, tells gzip and zstd from their magic numbers.
	Auto Compression = "auto"
)

// ParseCompression reads a compression's name; "" is def.
func ParseCompression(s string, def Compression) (Compression, error) {
	switch c := Compression(s); c {
	case "":
		return def, nil
	case None, Gzip, Zstd, Auto:
		return c, nil
	}
	return "", fmt.Errorf("compression must be none, gzip, zstd or auto, got %q", s)
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress returns the tar stream inside r and a func that releases the
// decoder.
func decompress(r io.Reader, c Compression) (io.Reader, func(), error) {
	if c == Auto {
		br := bufio.NewReader(r)
		head, _ := br.Peek(4)
		switch {
		case bytes.HasPrefix(head, gzipMagic):
			c = Gzip
		case bytes.HasPrefix(head, zstdMagic):
			c = Zstd
		default:
			c = None
		}
		r = br
	}
	switch c {
	case Gzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case Zstd:
		// One goroutine: a workspace upload must not take every core, and
		// the window bound keeps a hostile frame from asking for GiBs.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	}
	return r, func() {}, nil
}

// compress wraps w so that what is written to it is compressed with c;
// the returned func flushes and ends the compressed stream.
func compress(w io.Writer, c Compression) (io.Writer, func() error, error) {
	switch c {
	case Gzip:
		zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return nil, nil, err
		}
		return zw, zw.Close, nil
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			return nil, nil, err
		}
		return zw, zw.Close, nil
	}
	return w, func() error { return nil }, nil
}
