package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Search limits.
const (
	defaultSearchLimit = 100
	maxLineBytes       = 64 << 10 // a line's text is cut here
	maxResultBytes     = 16 << 20 // all kept text; past it the search stops as if at its limit
	maxStderrBytes     = 64 << 10
)

// Search runs ripgrep where the files are:
//
//	rg --json --line-number --color=never --hidden --no-config
//	   [--ignore-case] [--fixed-strings] [--glob G] [--context N] -- PATTERN TARGET
//
// A directory is searched from inside it (target ".", paths relative to it
// without "./"), entered through a descriptor opened via the root; a
// single file is opened via the root and fed on stdin, so its Path is its
// base name and no link swapped in later is followed. ripgrep never
// follows links while walking. Up to Limit matches are kept with their
// context lines (but not the leading context of the first match past the
// limit); LimitReached is set when another match exists, and ripgrep is
// then stopped. Each line's text is cut at 64 KiB and invalid UTF-8 is
// replaced. An invalid pattern or glob is ErrInvalid with ripgrep's
// message, a missing rg ErrUnavailable.
func (w *Workspace) Search(ctx context.Context, req opsapi.SearchRequest) (opsapi.SearchResult, error) {
	const op = "local.Search"
	if strings.IndexByte(req.Pattern, 0) >= 0 || strings.IndexByte(req.Glob, 0) >= 0 {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrInvalid, errors.New("NUL byte in pattern or glob"))
	}
	rel, err := w.rel(op, req.Path)
	if err != nil {
		return opsapi.SearchResult{}, err
	}
	canon, err := w.resolve(rel, true, false)
	if err != nil {
		return opsapi.SearchResult{}, mapErr(op, req.Path, err)
	}
	f, err := w.fsroot.OpenFile(canon, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return opsapi.SearchResult{}, mapErr(op, req.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return opsapi.SearchResult{}, mapErr(op, req.Path, err)
	}
	rg, err := lookPath(w.cfg.RgPath)
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable, errors.New("ripgrep (rg) is not available"))
	}

	args := []string{"--json", "--line-number", "--color=never", "--hidden", "--no-config"}
	if req.IgnoreCase {
		args = append(args, "--ignore-case")
	}
	if req.Literal {
		args = append(args, "--fixed-strings")
	}
	if g := strings.TrimPrefix(req.Glob, "./"); g != "" {
		args = append(args, "--glob", g)
	}
	ctxLines := max(req.Context, 0)
	if ctxLines > 0 {
		args = append(args, "--context", strconv.Itoa(ctxLines))
	}
	args = append(args, "--", req.Pattern)

	cmd := exec.CommandContext(ctx, rg, args...)
	// rg gets no HOME: it must not read a global gitignore from a
	// directory the workspace controls.
	cmd.Env = []string{"PATH=" + basePath, "LANG=C.UTF-8", "HOME=/nonexistent"}
	cmd.WaitDelay = time.Second
	fileName := ""
	switch {
	case fi.IsDir():
		cmd.Dir = fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		cmd.Args = append(cmd.Args, ".")
	case fi.Mode().IsRegular():
		fileName = path.Base(opsapi.Resolve(w.root, req.Path))
		cmd.Stdin = f
		cmd.Args = append(cmd.Args, "-")
	default:
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrInvalid, errors.New("not a regular file or directory"))
	}
	stderr := &capBuffer{max: maxStderrBytes}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	if err := cmd.Start(); err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, opsapi.ErrUnavailable, fmt.Errorf("failed to run ripgrep: %w", err))
	}

	limit := req.Limit
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	res, stopped, perr := collect(stdout, limit, ctxLines, fileName)
	if stopped {
		_ = cmd.Process.Kill()
	}
	if perr != nil && !stopped {
		// Unparseable output: stop rg, report below.
		_ = cmd.Process.Kill()
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()

	if err := ctx.Err(); err != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, err)
	}
	if stopped {
		return res, nil
	}
	if perr != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, perr)
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code := ee.ExitCode()
		if code == 1 || (code == 2 && len(res.Lines) > 0) {
			return res, nil // 1: no match; 2 with matches: some files unreadable
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = fmt.Sprintf("ripgrep exited with code %d", code)
		}
		var kind error
		if strings.Contains(msg, "regex parse error") || strings.Contains(msg, "error parsing glob") ||
			strings.Contains(msg, "unrecognized") || strings.Contains(msg, "invalid") {
			kind = opsapi.ErrInvalid
		}
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, kind, errors.New(msg))
	} else if werr != nil {
		return opsapi.SearchResult{}, opsapi.E(op, req.Path, nil, werr)
	}
	return res, nil
}

// collect reads ripgrep's JSON stream. It returns stopped when it quit
// early because a match past the limit appeared (or the kept text
// reached maxResultBytes).
func collect(r io.Reader, limit, ctxLines int, fileName string) (res opsapi.SearchResult, stopped bool, err error) {
	sc := &jsonScanner{r: bufio.NewReaderSize(r, 64<<10), maxString: base64.StdEncoding.EncodedLen(maxLineBytes) + 4}
	res.Lines = []opsapi.SearchLine{}
	matches, kept := 0, 0
	var lastPath string
	lastLine := 0
	for {
		m, err := sc.rgMessage()
		if err == io.EOF {
			return res, false, nil
		}
		if err != nil {
			return res, false, err
		}
		if m.typ != "match" && m.typ != "context" {
			continue
		}
		p := m.path
		if fileName != "" {
			p = fileName
		} else {
			p = strings.TrimPrefix(p, "./")
		}
		line := opsapi.SearchLine{Path: p, Line: m.line, Text: m.text, Match: m.typ == "match"}
		if line.Match {
			if matches == limit || kept >= maxResultBytes {
				res.LimitReached = true
				return res, true, nil
			}
			matches++
			lastPath, lastLine = p, m.line
		} else if matches == limit && (p != lastPath || m.line <= lastLine || m.line > lastLine+ctxLines) {
			continue // leading context of a match past the limit
		}
		kept += len(line.Text)
		res.Lines = append(res.Lines, line)
	}
}

// rgMessage is the part of one ripgrep JSON message that Search uses.
type rgMessage struct {
	typ  string
	path string
	line int
	text string
}

func (s *jsonScanner) rgMessage() (rgMessage, error) {
	var m rgMessage
	if _, err := s.ws(); err != nil {
		return m, err // io.EOF between messages is the clean end
	}
	_ = s.r.UnreadByte()
	err := s.object(func(key string) error {
		var err error
		switch key {
		case "type":
			m.typ, err = s.str()
		case "data":
			err = s.object(func(key string) error {
				var err error
				switch key {
				case "path":
					m.path, err = s.data()
				case "lines":
					m.text, err = s.data()
					m.text = cleanLine(m.text)
				case "line_number":
					m.line, err = s.int()
				default:
					err = s.skip()
				}
				return err
			})
		default:
			err = s.skip()
		}
		return err
	})
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return m, err
}

// data reads ripgrep's {"text": ...} or, for bytes that are not UTF-8,
// {"bytes": base64}; invalid UTF-8 is replaced.
func (s *jsonScanner) data() (string, error) {
	var out string
	b, err := s.ws()
	if err != nil {
		return "", err
	}
	_ = s.r.UnreadByte()
	if b == 'n' {
		return "", s.literal("null")
	}
	err = s.object(func(key string) error {
		switch key {
		case "text":
			t, err := s.str()
			out = t
			return err
		case "bytes":
			enc, err := s.str()
			if err != nil {
				return err
			}
			enc = enc[:len(enc)/4*4] // a cut string decodes up to the cut
			dec, derr := base64.StdEncoding.DecodeString(enc)
			if derr != nil {
				dec = nil
			}
			out = string(dec)
			return nil
		}
		return s.skip()
	})
	return validUTF8(out), err
}

// cleanLine drops the line ending and cuts the text at maxLineBytes on a
// rune boundary.
func cleanLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\r")
	if len(s) > maxLineBytes {
		cut := maxLineBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// validUTF8 replaces each invalid byte with U+FFFD, as a streaming
// TextDecoder does (strings.ToValidUTF8 would fold a run into one).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			b.WriteString("\uFFFD")
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	buf bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capBuffer) String() string { return c.buf.String() }
