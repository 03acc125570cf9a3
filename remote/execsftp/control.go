package execsftp

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// controlWriter is the server command's stderr: "@wsbroker " lines go to
// lines (the first few; later ones are logged), anything else the server
// prints is logged, a line at a time and cut at 1 KiB. It never blocks.
type controlWriter struct {
	log   *slog.Logger
	lines chan string

	mu   sync.Mutex
	buf  []byte
	drop bool // discarding the rest of an over-long line
}

func newControlWriter(log *slog.Logger) *controlWriter {
	return &controlWriter{log: log, lines: make(chan string, 16)}
}

const maxControlLine = 1024

func (c *controlWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !c.drop {
			room := maxControlLine - len(c.buf)
			if len(chunk) > room {
				c.buf = append(c.buf, chunk[:room]...)
				c.drop = true
			} else {
				c.buf = append(c.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		c.line(string(c.buf))
		c.buf, c.drop = c.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

func (c *controlWriter) line(l string) {
	if rest, ok := strings.CutPrefix(l, "@wsbroker "); ok {
		select {
		case c.lines <- rest:
			return
		default:
		}
	}
	if strings.TrimSpace(l) != "" {
		c.log.Warn("sftp server says", "line", l)
	}
}

var _ io.Writer = (*controlWriter)(nil)
