package policy

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
)

// Redactor replaces secrets in text that leaves the broker.
type Redactor struct {
	rules []redactRule
}

type redactRule struct {
	re   *regexp.Regexp
	repl []byte
}

// NewRedactor compiles rules.
func NewRedactor(rules []RedactRule) (*Redactor, error) {
	r := &Redactor{}
	for i, rule := range rules {
		if rule.Name == "" {
			return nil, fmt.Errorf("redact[%d]: name is required", i)
		}
		if rule.Pattern == "" {
			return nil, fmt.Errorf("redact %s: pattern is required", rule.Name)
		}
		re, err := regexp.Compile(rule.Pattern)
		if err != nil {
			return nil, fmt.Errorf("redact %s: %w", rule.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("redact %s: pattern matches the empty string", rule.Name)
		}
		repl := rule.Replacement
		if repl == "" {
			repl = "[REDACTED:" + rule.Name + "]"
		}
		r.rules = append(r.rules, redactRule{re: re, repl: []byte(repl)})
	}
	return r, nil
}

// Empty reports whether r redacts nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.rules) == 0 }

// String redacts s.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	return string(r.Bytes([]byte(s)))
}

// Bytes redacts b; the replacement is literal (no $1 expansion).
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() {
		return b
	}
	for _, rule := range r.rules {
		b = rule.re.ReplaceAllLiteral(b, rule.repl)
	}
	return b
}

// lastSpanStart returns the start of the earliest match that crosses cut,
// or cut when none does.
func (r *Redactor) lastSpanStart(b []byte, cut int) int {
	for _, rule := range r.rules {
		for _, loc := range rule.re.FindAllIndex(b, -1) {
			if loc[0] < cut && loc[1] > cut {
				cut = loc[0]
			}
		}
	}
	return cut
}

// Stream limits: a pending line is held back up to MaxHold bytes; past
// that everything but the last Overlap bytes goes out, so a secret of up
// to Overlap bytes split across writes is still caught.
const (
	MaxHold = 64 << 10
	Overlap = 1 << 10
)

// StreamRedactor redacts a byte stream written in arbitrary chunks. It
// emits complete lines at once and holds back the unfinished last line,
// so a secret cut between two writes is joined before the patterns run.
// Patterns are matched within a line in the stream (a pattern spanning
// lines is only caught when one write holds it whole). Flush emits the
// rest at the end.
type StreamRedactor struct {
	r   *Redactor
	out io.Writer
	buf []byte
}

// NewStreamRedactor returns a StreamRedactor writing to out. With an
// empty redactor it passes writes straight through.
func NewStreamRedactor(r *Redactor, out io.Writer) *StreamRedactor {
	return &StreamRedactor{r: r, out: out}
}

// Write buffers p and emits what can no longer be part of a secret.
func (s *StreamRedactor) Write(p []byte) (int, error) {
	if s.r.Empty() {
		return s.out.Write(p)
	}
	s.buf = append(s.buf, p...)
	cut := bytes.LastIndexByte(s.buf, '\n') + 1
	if len(s.buf)-cut > MaxHold {
		cut = s.r.lastSpanStart(s.buf, len(s.buf)-Overlap)
	}
	if cut == 0 {
		return len(p), nil
	}
	if err := s.emit(s.buf[:cut]); err != nil {
		return 0, err
	}
	s.buf = append(s.buf[:0], s.buf[cut:]...)
	return len(p), nil
}

// Flush emits whatever is held back.
func (s *StreamRedactor) Flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	err := s.emit(s.buf)
	s.buf = s.buf[:0]
	return err
}

func (s *StreamRedactor) emit(b []byte) error {
	out := s.r.Bytes(append([]byte(nil), b...))
	if len(out) == 0 {
		return nil
	}
	_, err := s.out.Write(out)
	return err
}

// WithLiterals returns a Redactor that also replaces each of values, as
// it is, with "[REDACTED:<name>]" where name is the value's name in
// names (values[i] is named names[i]). Empty values are skipped. r is
// not changed.
func (r *Redactor) WithLiterals(names, values []string) *Redactor {
	out := &Redactor{}
	if r != nil {
		out.rules = append(out.rules, r.rules...)
	}
	for i, v := range values {
		if v == "" {
			continue
		}
		out.rules = append(out.rules, redactRule{
			re:   regexp.MustCompile(regexp.QuoteMeta(v)),
			repl: []byte("[REDACTED:" + names[i] + "]"),
		})
	}
	return out
}
