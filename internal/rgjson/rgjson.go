package rgjson

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Limits.
const (
	DefaultLimit   = 100
	MaxLineBytes   = 64 << 10 // a line's text is cut here
	MaxResultBytes = 16 << 20 // all kept text; past it the search stops as if at its limit
	MaxStderrBytes = 64 << 10 // what a caller should keep of ripgrep's stderr
)

// Args returns ripgrep's arguments for req, ending with "--" and the
// pattern; the caller appends the path to search ("-" for stdin). A NUL
// in the pattern or glob is ErrInvalid.
func Args(req opsapi.SearchRequest) ([]string, error) {
	if strings.IndexByte(req.Pattern, 0) >= 0 || strings.IndexByte(req.Glob, 0) >= 0 {
		return nil, opsapi.E("search", req.Path, opsapi.ErrInvalid, errors.New("NUL byte in pattern or glob"))
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
	if req.Context > 0 {
		args = append(args, "--context", strconv.Itoa(req.Context))
	}
	return append(args, "--", req.Pattern), nil
}

// Collect reads ripgrep's JSON stream from r. Paths are made relative
// (a leading "./" dropped); when fileName is set (a single file was
// searched) every line gets it as its path. stopped says Collect returned
// early because a match past the limit appeared (LimitReached is then
// set) or the kept text reached MaxResultBytes: the caller should stop
// ripgrep. An unparseable stream is an error.
func Collect(r io.Reader, req opsapi.SearchRequest, fileName string) (res opsapi.SearchResult, stopped bool, err error) {
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	ctxLines := max(req.Context, 0)
	s := &scanner{r: bufio.NewReaderSize(r, 64<<10), max: base64.StdEncoding.EncodedLen(MaxLineBytes) + 4}
	res.Lines = []opsapi.SearchLine{}
	matches, kept := 0, 0
	lastPath, lastLine := "", 0
	for {
		m, err := s.message()
		if err == io.EOF {
			return res, false, nil
		}
		if err != nil {
			return res, false, err
		}
		if m.typ != "match" && m.typ != "context" {
			continue
		}
		p := replaceInvalid(strings.TrimPrefix(m.path, "./"))
		if fileName != "" {
			p = fileName
		}
		line := opsapi.SearchLine{Path: p, Line: m.line, Text: cleanLine(m.text), Match: m.typ == "match"}
		if line.Match {
			if matches == limit || kept >= MaxResultBytes {
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

// Result decides a finished search: ripgrep's exit code (0 matches, 1 no
// match, 2 an error, with matches meaning some files were unreadable),
// its stderr, and what Collect kept. A regex or glob error is ErrInvalid
// with ripgrep's message.
func Result(op, path string, res opsapi.SearchResult, code int, stderr string) (opsapi.SearchResult, error) {
	if code == 0 || code == 1 || code == 2 && len(res.Lines) > 0 {
		return res, nil
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = fmt.Sprintf("ripgrep exited with code %d", code)
	}
	var kind error
	if strings.Contains(msg, "regex parse error") || strings.Contains(msg, "error parsing glob") ||
		strings.Contains(msg, "unrecognized") || strings.Contains(msg, "invalid") {
		kind = opsapi.ErrInvalid
	}
	return opsapi.SearchResult{}, opsapi.E(op, path, kind, errors.New(msg))
}

// cleanLine drops the line ending and cuts s at MaxLineBytes on a rune
// boundary; invalid UTF-8 is replaced.
func cleanLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\r")
	if len(s) > MaxLineBytes {
		cut := MaxLineBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return replaceInvalid(s)
}

// replaceInvalid replaces each maximal invalid subsequence with U+FFFD, as
// the WHATWG decoder (pi's TextDecoder) does; strings.ToValidUTF8 would
// fold a whole run of bad bytes into one.
func replaceInvalid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || n > 1 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += maximalSubpart(s[i:])
	}
	return b.String()
}

// maximalSubpart is the length of the invalid sequence at the start of s:
// a lead byte and the continuation bytes that could still have completed
// it.
func maximalSubpart(s string) int {
	c := s[0]
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		if s[n] < lo || s[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// message is what Collect uses of one ripgrep message.
type message struct {
	typ, path, text string
	line            int
}

var errSyntax = errors.New("malformed JSON from ripgrep")

// scanner reads a stream of JSON values keeping at most max bytes of any
// string and skipping what it is not asked for.
type scanner struct {
	r   *bufio.Reader
	max int
}

func (s *scanner) message() (message, error) {
	var m message
	if _, err := s.peek(); err != nil {
		return m, err // io.EOF between messages is the end
	}
	err := s.object(func(key string) (err error) {
		switch key {
		case "type":
			m.typ, err = s.str()
		case "data":
			err = s.object(func(key string) (err error) {
				switch key {
				case "path":
					m.path, err = s.data()
				case "lines":
					m.text, err = s.data()
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
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: truncated message", errSyntax)
	}
	return m, err
}

// data reads {"text": ...} or, for bytes that are not UTF-8, {"bytes":
// base64}; null is "".
func (s *scanner) data() (string, error) {
	b, err := s.peek()
	if err != nil {
		return "", err
	}
	if b == 'n' {
		return "", s.skip()
	}
	var out string
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
			if derr == nil {
				out = string(dec)
			}
			return nil
		}
		return s.skip()
	})
	return out, err
}

// peek returns the next non-space byte without consuming it.
func (s *scanner) peek() (byte, error) {
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		s.unread()
		return b, nil
	}
}

// consume drops the byte peek just returned. peek left it buffered, so
// the read cannot fail.
func (s *scanner) consume() { _, _ = s.r.ReadByte() }

// unread puts back the byte just read; bufio.Reader guarantees that
// succeeds straight after a successful ReadByte.
func (s *scanner) unread() { _ = s.r.UnreadByte() }

func (s *scanner) expect(want byte) error {
	b, err := s.peek()
	if err != nil {
		return err
	}
	s.consume()
	if b != want {
		return fmt.Errorf("%w: got %q, want %q", errSyntax, b, want)
	}
	return nil
}

// object reads an object, calling field for each key with the value next;
// field must consume the value.
func (s *scanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if b, err := s.peek(); err != nil {
		return err
	} else if b == '}' {
		s.consume()
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		b, err := s.peek()
		if err != nil {
			return err
		}
		s.consume()
		switch b {
		case ',':
		case '}':
			return nil
		default:
			return fmt.Errorf("%w: got %q in object", errSyntax, b)
		}
	}
}

// str reads a string, keeping at most s.max bytes of it.
func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	var out []byte
	keep := func(p ...byte) {
		if len(out) < s.max {
			out = append(out, p[:min(len(p), s.max-len(out))]...)
		}
	}
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return "", err
		}
		switch {
		case b == '"':
			return string(out), nil
		case b == '\\':
			e, err := s.r.ReadByte()
			if err != nil {
				return "", err
			}
			switch e {
			case '"', '\\', '/':
				keep(e)
			case 'b':
				keep('\b')
			case 'f':
				keep('\f')
			case 'n':
				keep('\n')
			case 'r':
				keep('\r')
			case 't':
				keep('\t')
			case 'u':
				r, err := s.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					// A pair is \uD8xx\uDCxx; a lone half is U+FFFD.
					if next, _ := s.r.Peek(2); len(next) == 2 && next[0] == '\\' && next[1] == 'u' {
						_, _ = s.r.Discard(2) // Peek just returned these two bytes, so they are buffered
						r2, err := s.hex4()
						if err != nil {
							return "", err
						}
						r = utf16.DecodeRune(r, r2)
					} else {
						r = utf8.RuneError
					}
				}
				keep(utf8.AppendRune(nil, r)...)
			default:
				return "", fmt.Errorf("%w: bad escape \\%c", errSyntax, e)
			}
		default:
			keep(b)
		}
	}
}

func (s *scanner) hex4() (rune, error) {
	var r rune
	for range 4 {
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		var v byte
		switch {
		case b >= '0' && b <= '9':
			v = b - '0'
		case b >= 'a' && b <= 'f':
			v = b - 'a' + 10
		case b >= 'A' && b <= 'F':
			v = b - 'A' + 10
		default:
			return 0, fmt.Errorf("%w: bad \\u escape", errSyntax)
		}
		r = r<<4 | rune(v)
	}
	return r, nil
}

func (s *scanner) int() (int, error) {
	b, err := s.peek()
	if err != nil {
		return 0, err
	}
	if b == 'n' {
		return 0, s.skip()
	}
	var digits []byte
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if b < '0' || b > '9' {
			s.unread()
			break
		}
		if len(digits) < 18 {
			digits = append(digits, b)
		}
	}
	n, err := strconv.Atoi(string(digits))
	if err != nil {
		return 0, fmt.Errorf("%w: bad number", errSyntax)
	}
	return n, nil
}

// skip consumes one value of any kind, holding none of it.
func (s *scanner) skip() error {
	b, err := s.peek()
	if err != nil {
		return err
	}
	switch {
	case b == '{':
		return s.object(func(string) error { return s.skip() })
	case b == '[':
		s.consume()
		if b, err := s.peek(); err != nil {
			return err
		} else if b == ']' {
			s.consume()
			return nil
		}
		for {
			if err := s.skip(); err != nil {
				return err
			}
			b, err := s.peek()
			if err != nil {
				return err
			}
			s.consume()
			if b == ']' {
				return nil
			}
			if b != ',' {
				return fmt.Errorf("%w: got %q in array", errSyntax, b)
			}
		}
	case b == '"':
		s.consume()
		for {
			b, err := s.r.ReadByte()
			if err != nil {
				return err
			}
			if b == '\\' {
				if _, err := s.r.ReadByte(); err != nil {
					return err
				}
			} else if b == '"' {
				return nil
			}
		}
	default: // number, true, false, null
		for {
			b, err := s.r.ReadByte()
			if err != nil {
				return err
			}
			if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b == '-' || b == '+' || b == '.' || b == 'E') {
				s.unread()
				return nil
			}
		}
	}
}
