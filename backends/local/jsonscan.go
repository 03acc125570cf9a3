package local

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner reads a stream of JSON values (ripgrep's --json lines)
// without ever holding more than a bounded amount of one: strings are cut
// at maxString bytes and values the caller does not ask for are skipped as
// they stream past. A 1 GiB line in a searched file therefore costs
// maxString bytes, not 1 GiB (and not the 4/3 of it its base64 would).
type jsonScanner struct {
	r         *bufio.Reader
	maxString int
}

var errJSON = errors.New("malformed JSON from ripgrep")

func (s *jsonScanner) ws() (byte, error) {
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b, nil
	}
}

func (s *jsonScanner) expect(want byte) error {
	b, err := s.ws()
	if err != nil {
		return err
	}
	if b != want {
		return fmt.Errorf("%w: got %q, want %q", errJSON, b, want)
	}
	return nil
}

// object reads an object, calling field for each key with the scanner
// positioned at the value; field must consume the value.
func (s *jsonScanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	b, err := s.ws()
	if err != nil {
		return err
	}
	if b == '}' {
		return nil
	}
	_ = s.r.UnreadByte()
	for {
		if err := s.expect('"'); err != nil {
			return err
		}
		key, err := s.stringBody()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		b, err := s.ws()
		if err != nil {
			return err
		}
		switch b {
		case ',':
			continue
		case '}':
			return nil
		default:
			return fmt.Errorf("%w: got %q in object", errJSON, b)
		}
	}
}

// str reads a string value (cut at maxString bytes); null reads as "".
func (s *jsonScanner) str() (string, error) {
	b, err := s.ws()
	if err != nil {
		return "", err
	}
	switch b {
	case '"':
		return s.stringBody()
	case 'n':
		_ = s.r.UnreadByte()
		return "", s.literal("null")
	}
	return "", fmt.Errorf("%w: got %q, want a string", errJSON, b)
}

// int reads a number value as an int.
func (s *jsonScanner) int() (int, error) {
	b, err := s.ws()
	if err != nil {
		return 0, err
	}
	if b == 'n' {
		_ = s.r.UnreadByte()
		return 0, s.literal("null")
	}
	num := []byte{b}
	for len(num) < 64 {
		c, err := s.r.ReadByte()
		if err != nil {
			break
		}
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			_ = s.r.UnreadByte()
			break
		}
		num = append(num, c)
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return 0, fmt.Errorf("%w: number %q", errJSON, num)
	}
	return int(f), nil
}

// skip consumes one value of any kind without keeping it.
func (s *jsonScanner) skip() error {
	b, err := s.ws()
	if err != nil {
		return err
	}
	switch {
	case b == '"':
		return s.skipString()
	case b == '{':
		_ = s.r.UnreadByte()
		return s.object(func(string) error { return s.skip() })
	case b == '[':
		c, err := s.ws()
		if err != nil {
			return err
		}
		if c == ']' {
			return nil
		}
		_ = s.r.UnreadByte()
		for {
			if err := s.skip(); err != nil {
				return err
			}
			c, err := s.ws()
			if err != nil {
				return err
			}
			if c == ']' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("%w: got %q in array", errJSON, c)
			}
		}
	case b == 't':
		_ = s.r.UnreadByte()
		return s.literal("true")
	case b == 'f':
		_ = s.r.UnreadByte()
		return s.literal("false")
	case b == 'n':
		_ = s.r.UnreadByte()
		return s.literal("null")
	case b == '-' || b >= '0' && b <= '9':
		_ = s.r.UnreadByte()
		_, err := s.int()
		return err
	}
	return fmt.Errorf("%w: unexpected %q", errJSON, b)
}

func (s *jsonScanner) literal(want string) error {
	for i := 0; i < len(want); i++ {
		b, err := s.r.ReadByte()
		if err != nil {
			return err
		}
		if b != want[i] {
			return fmt.Errorf("%w: bad literal", errJSON)
		}
	}
	return nil
}

func (s *jsonScanner) skipString() error {
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return err
		}
		switch b {
		case '"':
			return nil
		case '\\':
			if _, err := s.r.ReadByte(); err != nil {
				return err
			}
		}
	}
}

// stringBody reads the rest of a string after its opening quote, keeping
// at most maxString bytes.
func (s *jsonScanner) stringBody() (string, error) {
	var out []byte
	add := func(b ...byte) {
		if len(out)+len(b) <= s.maxString {
			out = append(out, b...)
		}
	}
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return "", err
		}
		switch b {
		case '"':
			return string(out), nil
		case '\\':
			e, err := s.r.ReadByte()
			if err != nil {
				return "", err
			}
			switch e {
			case 'n':
				add('\n')
			case 't':
				add('\t')
			case 'r':
				add('\r')
			case 'b':
				add('\b')
			case 'f':
				add('\f')
			case 'u':
				r, err := s.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					r = s.lowSurrogate(r)
				}
				add(utf8.AppendRune(nil, r)...)
			default: // '"', '\\', '/'
				add(e)
			}
		default:
			add(b)
		}
	}
}

// lowSurrogate completes the pair begun by hi, or yields U+FFFD.
func (s *jsonScanner) lowSurrogate(hi rune) rune {
	if next, err := s.r.Peek(2); err != nil || string(next) != `\u` {
		return utf8.RuneError
	}
	_, _ = s.r.Discard(2)
	lo, err := s.hex4()
	if err != nil {
		return utf8.RuneError
	}
	return utf16.DecodeRune(hi, lo)
}

func (s *jsonScanner) hex4() (rune, error) {
	var r rune
	for i := 0; i < 4; i++ {
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
			return 0, fmt.Errorf("%w: bad \\u escape", errJSON)
		}
		r = r<<4 | rune(v)
	}
	return r, nil
}
