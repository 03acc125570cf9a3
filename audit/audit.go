package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// APIVersion and Kind mark every record.
const (
	APIVersion = "audit.wsbroker.dev/v1"
	Kind       = "Event"
)

// Stages of a record.
const (
	// StageResponseComplete: one per HTTP request, when its response ended.
	StageResponseComplete = "ResponseComplete"
	// StageToolCall: one per tool call (a batch has one per call).
	StageToolCall = "ToolCall"
)

// Genesis is the prevHash of the first record of a chain.
var Genesis = strings.Repeat("0", 64)

// Args are the safe description of a call's arguments.
type Args struct {
	// Digest is "sha256:<hex>" of the arguments as received (the tool's
	// JSON, or the request's method, route, query and body digest).
	Digest string `json:"digest,omitempty"`
	// Path is the path the call names.
	Path string `json:"path,omitempty"`
	// Command is the command line, redacted and cut to MaxCommand bytes.
	Command string `json:"command,omitempty"`
	// Env are the names of environment variables passed, never values.
	Env []string `json:"env,omitempty"`
}

// Result describes the outcome.
type Result struct {
	Status   int    `json:"status,omitempty"`
	Code     string `json:"code,omitempty"`
	IsError  *bool  `json:"isError,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	BytesIn  int64  `json:"bytesIn"`
	BytesOut int64  `json:"bytesOut"`
}

// Event is one audit record.
type Event struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Seq        uint64 `json:"seq"`
	// AuditID is made by the broker; RequestID is the X-Request-Id the
	// logs carry, which a client may have chosen, so it only correlates.
	AuditID   string `json:"auditID"`
	RequestID string `json:"requestID,omitempty"`
	Stage     string `json:"stage"`
	Tenant    string `json:"tenant,omitempty"`
	// SourceIP is the connection's peer address, never a header.
	SourceIP  string `json:"sourceIP,omitempty"`
	Verb      string `json:"verb,omitempty"`
	Route     string `json:"route,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Tool      string `json:"tool,omitempty"`
	Operation string `json:"operation,omitempty"`
	Args      *Args  `json:"args,omitempty"`
	// Decision is "allow" or "deny"; Rule and Reason explain a denial
	// (rule "tenant" for another tenant's workspace, "quota", "rate"...).
	Decision string  `json:"decision,omitempty"`
	Rule     string  `json:"rule,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Result   *Result `json:"result,omitempty"`

	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	DurationNs               int64     `json:"durationNs"`

	PrevHash string `json:"prevHash"`
	// Hash is filled in when the record is read back; writing appends it.
	Hash string `json:"hash,omitempty"`
}

// MaxCommand bounds the command text kept in a record.
const MaxCommand = 256

// Truncate cuts s to n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// Digest returns "sha256:<hex>" of the parts, each length-prefixed so that
// ("ab","c") and ("a","bc") differ.
func Digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Log appends events to a file, rotating it by size. A nil *Log discards.
type Log struct {
	path     string
	maxBytes int64
	logger   *slog.Logger

	mu   sync.Mutex
	f    *os.File
	size int64
	seq  uint64
	prev string
}

// Open opens (or creates) the audit file at path and continues its chain.
// maxBytes <= 0 means never rotate.
func Open(path string, maxBytes int64, logger *slog.Logger) (*Log, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{path: path, maxBytes: maxBytes, logger: logger, prev: Genesis}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// Continue after the newest record, in the current file or, when it
	// is empty, the newest rotated one.
	files, err := l.files()
	if err != nil {
		return nil, err
	}
	for i := len(files) - 1; i >= 0; i-- {
		last, err := lastLine(files[i])
		if err != nil {
			return nil, err
		}
		if last == nil {
			continue
		}
		var ev Event
		if err := json.Unmarshal(last, &ev); err != nil || ev.Hash == "" {
			return nil, fmt.Errorf("audit: the last record of %s is unreadable; run `broker audit verify` (%v)", files[i], err)
		}
		l.seq, l.prev = ev.Seq, ev.Hash
		break
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	l.f, l.size = f, st.Size()
	return l, nil
}

// lastLine returns the last non-empty line of the file.
func lastLine(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("audit: %w", err)
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return nil, nil
	}
	return b[bytes.LastIndexByte(b, '\n')+1:], nil
}

// files returns the rotated files, oldest first, then the current one.
func (l *Log) files() ([]string, error) {
	rotated, err := filepath.Glob(l.path + ".*")
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	sort.Strings(rotated)
	return append(rotated, l.path), nil
}

// Path is the current file.
func (l *Log) Path() string { return l.path }

// Write appends ev, filling in kind, version, seq and the chain. A write
// failure is logged, not returned: the request has already been served.
func (l *Log) Write(ev Event) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ev.Kind, ev.APIVersion = Kind, APIVersion
	ev.Seq = l.seq + 1
	ev.PrevHash = l.prev
	ev.Hash = ""
	line, hash := seal(ev)
	if l.maxBytes > 0 && l.size > 0 && l.size+int64(len(line)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			l.logger.Error("audit rotation failed", "err", err)
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		l.logger.Error("audit write failed", "err", err, "auditID", ev.AuditID)
		return
	}
	l.seq, l.prev = ev.Seq, hash
}

// seal returns the record's line with its hash appended, and the hash.
func seal(ev Event) ([]byte, string) {
	body, err := json.Marshal(ev)
	if err != nil {
		panic(err) // Event has only marshalable fields
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	line := append(body[:len(body)-1:len(body)-1], []byte(`,"hash":"`+hash+`"}`+"\n")...)
	return line, hash
}

func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	name := l.path + "." + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(l.path, name); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	l.f, l.size = f, 0
	return nil
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// Read returns up to limit of the newest records keep accepts, oldest
// first, across the rotated files and the current one. It reads the
// newest file first and stops at the first file that completes the
// count, so a long history is not read for a short answer.
func (l *Log) Read(keep func(*Event) bool, limit int) ([]json.RawMessage, error) {
	if l == nil {
		return []json.RawMessage{}, nil
	}
	l.mu.Lock()
	files, err := l.files()
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := []json.RawMessage{}
	for i := len(files) - 1; i >= 0; i-- {
		var got []json.RawMessage
		err := eachLine(files[i], func(_ int, line []byte) error {
			var ev Event
			if json.Unmarshal(line, &ev) == nil && keep(&ev) {
				got = append(got, json.RawMessage(bytes.Clone(line)))
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		out = append(got, out...)
		if limit > 0 && len(out) >= limit {
			return out[len(out)-limit:], nil
		}
	}
	return out, nil
}

func eachLine(name string, fn func(n int, line []byte) error) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := fn(n, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Problem is one break in a chain.
type Problem struct {
	File   string
	Line   int
	Detail string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Detail) }

// Report is what Verify found.
type Report struct {
	Records  int
	FirstSeq uint64
	LastSeq  uint64
	LastHash string
	// Anchored is set when the chain starts at the genesis record; when it
	// does not, earlier files were not given and records before FirstSeq
	// are not checked.
	Anchored bool
	Problems []Problem
}

// Verify checks the files, in the order given (oldest first), as one
// chain: every record's hash must match its content, its prevHash the
// record before, and seq must rise by one. It returns the problems found;
// the error is for files that cannot be read.
func Verify(files ...string) (Report, error) {
	var rep Report
	prev, seq := "", uint64(0)
	for _, name := range files {
		err := eachLine(name, func(n int, line []byte) error {
			rep.Records++
			bad := func(format string, args ...any) {
				rep.Problems = append(rep.Problems, Problem{File: name, Line: n, Detail: fmt.Sprintf(format, args...)})
			}
			var ev Event
			if err := json.Unmarshal(line, &ev); err != nil {
				bad("not a JSON record: %v", err)
				prev = ""
				return nil
			}
			suffix := `,"hash":"` + ev.Hash + `"}`
			switch {
			case len(ev.Hash) != 64 || !bytes.HasSuffix(line, []byte(suffix)):
				bad("record %d has no trailing hash field", ev.Seq)
			default:
				body := append(bytes.Clone(line[:len(line)-len(suffix)]), '}')
				sum := sha256.Sum256(body)
				if hex.EncodeToString(sum[:]) != ev.Hash {
					bad("record %d was edited: its hash does not match its content", ev.Seq)
				}
			}
			if rep.Records == 1 {
				rep.FirstSeq = ev.Seq
				rep.Anchored = ev.Seq == 1 && ev.PrevHash == Genesis
				if ev.Seq == 1 && ev.PrevHash != Genesis {
					bad("record 1 does not start from the genesis hash")
				}
			} else {
				if ev.Seq != seq+1 {
					bad("record %d follows record %d: records were removed or reordered", ev.Seq, seq)
				}
				if ev.PrevHash != prev {
					bad("record %d does not chain to the record before it (removed, reordered or edited)", ev.Seq)
				}
			}
			prev, seq = ev.Hash, ev.Seq
			rep.LastSeq, rep.LastHash = ev.Seq, ev.Hash
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("audit: %w", err)
		}
	}
	return rep, nil
}
