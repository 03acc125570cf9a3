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
	"syscall"
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
	// StageRepaired: written at start after a torn last record was cut
	// off; its reason names the file and the cut bytes' size and digest.
	StageRepaired = "Repaired"
	// StageSummary: requests counted but not recorded one by one (those
	// that failed authentication past their budget); Count is how many,
	// from RequestReceivedTimestamp to StageTimestamp.
	StageSummary = "Summary"
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
	// Count is the number of requests a StageSummary record stands for.
	Count int64 `json:"count,omitempty"`

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
	path   string
	opts   Options
	logger *slog.Logger

	mu   sync.Mutex
	f    *os.File
	size int64
	seq  uint64
	prev string
	// err is the last write's failure: while set, Ready refuses calls
	// (fail closed); the next write that succeeds clears it.
	err error
	// torn is set when a failed write left bytes that could not be cut
	// off; the next write cuts them first.
	torn bool
	// reserve is the file that holds the audit's space reserve, reserved
	// its allocated size (see Options.Reserve).
	reserve  *os.File
	reserved int64
}

// Options are a Log's rotation, retention and free-space reserve.
type Options struct {
	// MaxBytes rotates the current file before it grows past this size;
	// <= 0 never rotates.
	MaxBytes int64
	// MaxFiles and MaxTotalBytes bound the rotated files kept: after a
	// rotation the oldest are deleted until both hold. <= 0 keeps all.
	MaxFiles      int
	MaxTotalBytes int64
	// MinFree is the free space (bytes available to unprivileged users)
	// the audit file's filesystem must keep for Ready to admit calls:
	// 0 means DefaultMinFree, < 0 no check.
	MinFree int64
	// Reserve is the space kept allocated (fallocate) in a hidden file
	// beside the audit file, so that what else shares its filesystem
	// (workspaces, by default) cannot take the audit's room: when a
	// write finds the filesystem full, the reserve gives back what the
	// record needs, and Ready allocates it again once there is room.
	// 0 means DefaultReserve, < 0 none.
	Reserve int64
}

// DefaultMinFree is the free-space reserve Ready asks for by default:
// room for many bounded records, so the call admitted can be recorded.
const DefaultMinFree = 1 << 20

// Open opens (or creates) the audit file at path and continues its chain,
// with MaxBytes maxBytes and the other Options at their defaults.
func Open(path string, maxBytes int64, logger *slog.Logger) (*Log, error) {
	return OpenWith(path, Options{MaxBytes: maxBytes}, logger)
}

// OpenWith opens (or creates) the audit file at path and continues its
// chain. A torn last line (a write cut short by a full disk or a crash)
// is cut off, and the chain goes on with a StageRepaired record that
// says so, so the trail still verifies.
func OpenWith(path string, opts Options, logger *slog.Logger) (*Log, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinFree == 0 {
		opts.MinFree = DefaultMinFree
	}
	if opts.Reserve == 0 {
		opts.Reserve = DefaultReserve
	}
	l := &Log{path: path, opts: opts, logger: logger, prev: Genesis}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// Continue after the newest record, in the current file or, when it
	// is empty, the newest rotated one.
	files, err := l.files()
	if err != nil {
		return nil, err
	}
	var repaired *cutTail
	for i := len(files) - 1; i >= 0; i-- {
		cut, err := cutTornTail(files[i])
		if err != nil {
			return nil, err
		}
		if cut != nil {
			repaired = cut
		}
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
	if err := l.openReserve(opts.Reserve); err != nil {
		f.Close()
		return nil, err
	}
	if repaired != nil {
		logger.Warn("audit: cut off a torn last record", "file", repaired.file, "bytes", repaired.n)
		now := time.Now().UTC()
		if err := l.Write(Event{
			AuditID: "repair-" + now.Format("20060102T150405.000000000Z"), Stage: StageRepaired,
			Rule: "audit", Reason: fmt.Sprintf("a torn last record of %d bytes (%s) was cut off %s at start",
				repaired.n, repaired.digest, repaired.file),
			Args:                     &Args{Digest: repaired.digest},
			RequestReceivedTimestamp: now, StageTimestamp: now,
		}); err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

// lastLine returns the last non-empty line of the file, reading it from
// its end.
func lastLine(path string) ([]byte, error) {
	var last []byte
	err := eachLineReverse(path, func(line []byte) bool {
		last = bytes.Clone(line)
		return true
	})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("audit: %w", err)
	}
	return last, nil
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

// Write appends ev, filling in kind, version, seq and the chain, with
// every field bounded (see Bound). A failed write is logged and
// returned, and leaves no torn line behind: its bytes are cut off, and
// Ready refuses calls until a later write succeeds.
func (l *Log) Write(ev Event) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ev = Bound(ev)
	ev.Kind, ev.APIVersion = Kind, APIVersion
	ev.Seq = l.seq + 1
	ev.PrevHash = l.prev
	ev.Hash = ""
	line, hash := seal(ev)
	if err := l.write(line); err != nil {
		l.err = fmt.Errorf("audit: writing record %d to %s: %w", ev.Seq, l.path, err)
		l.logger.Error("audit write failed", "err", err, "auditID", ev.AuditID)
		return l.err
	}
	l.seq, l.prev, l.err = ev.Seq, hash, nil
	return nil
}

// write appends one line, rotating first when it would pass MaxBytes. A
// short write is cut back off, so the file never holds half a record.
func (l *Log) write(line []byte) error {
	if l.torn {
		if err := l.f.Truncate(l.size); err != nil {
			return fmt.Errorf("cutting off an earlier torn record: %w", err)
		}
		l.torn = false
	}
	if l.opts.MaxBytes > 0 && l.size > 0 && l.size+int64(len(line)) > l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			l.logger.Error("audit rotation failed", "err", err)
		}
	}
	for {
		n, err := l.f.Write(line)
		if err == nil {
			l.size += int64(n)
			return nil
		}
		if n > 0 {
			if terr := l.f.Truncate(l.size); terr != nil {
				l.torn = true
				return err
			}
		}
		// A full filesystem: the record goes into the space reserve.
		if !errors.Is(err, syscall.ENOSPC) || !l.releaseReserve(int64(len(line))) {
			return err
		}
	}
}

// Ready reports whether a call may be admitted: nil unless the last
// write failed or the file's filesystem has less than MinFree bytes
// available. A call that could not be recorded is not run (fail closed).
// A refusal for space wraps syscall.ENOSPC: the space reserve still
// holds records, so a caller may admit what frees space. When there is
// room, Ready grows a reserve that was used back to its size.
func (l *Log) Ready() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A full disk that has room again admits calls; any other write
	// failure holds until a write succeeds.
	if l.err != nil && (!errors.Is(l.err, syscall.ENOSPC) || l.opts.MinFree < 0) {
		return l.err
	}
	if l.opts.MinFree < 0 {
		return nil
	}
	free, err := freeBytes(l.f)
	if err != nil {
		return fmt.Errorf("audit: %s: %w", l.path, err)
	}
	if free < l.opts.MinFree {
		return fmt.Errorf("audit: the filesystem of %s has %d bytes free, under the minimum of %d: %w",
			l.path, free, l.opts.MinFree, syscall.ENOSPC)
	}
	l.refillReserve(free)
	return nil
}

// Reserved is the size of the space reserve now allocated.
func (l *Log) Reserved() int64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserved
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
	l.prune()
	return nil
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserve != nil {
		_ = l.reserve.Close() // its space stays reserved for the next Open
	}
	return l.f.Close()
}

// Read returns up to limit of the newest records keep accepts, oldest
// first, across the rotated files and the current one. It reads each file
// from its end, newest file first, and stops as soon as it has limit
// records, so a long history is not read for a short answer.
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
	var newest []json.RawMessage // newest first
	full := func() bool { return limit > 0 && len(newest) >= limit }
	for i := len(files) - 1; i >= 0 && !full(); i-- {
		err := eachLineReverse(files[i], func(line []byte) bool {
			var ev Event
			if json.Unmarshal(line, &ev) == nil && keep(&ev) {
				newest = append(newest, json.RawMessage(bytes.Clone(line)))
			}
			return full()
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	out := make([]json.RawMessage, len(newest))
	for i, rec := range newest {
		out[len(newest)-1-i] = rec
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
