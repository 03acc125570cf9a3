package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
)

// TestFieldsAreBounded: a record built from 64 KiB client-chosen values
// (a 401's query path, an X-Request-Id) stays a few KiB, and each cut
// value names the hash of the whole.
func TestFieldsAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l := open(t, path, 0)
	huge := strings.Repeat("é", 32<<10) // 64 KiB, multi-byte runes
	env := make([]string, 500)
	for i := range env {
		env[i] = fmt.Sprintf("VAR_%d", i)
	}
	args := &audit.Args{Path: huge, Command: huge, Env: env}
	if err := l.Write(audit.Event{AuditID: "a", RequestID: huge, Route: huge, Reason: huge, Args: args}); err != nil {
		t.Fatal(err)
	}
	if args.Path != huge || len(args.Env) != 500 {
		t.Fatal("Write changed the caller's Args")
	}
	ls := lines(t, path)
	if len(ls[0]) > 16<<10 {
		t.Fatalf("one record is %d bytes", len(ls[0]))
	}
	var ev audit.Event
	if err := json.Unmarshal(ls[0], &ev); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(huge))
	want := fmt.Sprintf("…[cut: %d bytes, sha256:%s]", len(huge), hex.EncodeToString(sum[:]))
	for name, v := range map[string]string{"requestID": ev.RequestID, "route": ev.Route, "reason": ev.Reason,
		"path": ev.Args.Path, "command": ev.Args.Command} {
		if len(v) > audit.MaxField || !strings.HasSuffix(v, want) || !strings.HasPrefix(v, "éé") {
			t.Errorf("%s: %d bytes, ends %q", name, len(v), v[max(0, len(v)-120):])
		}
	}
	if len(ev.Args.Env) != audit.MaxEnvNames+1 || ev.Args.Env[audit.MaxEnvNames] != "…[436 more names]" {
		t.Errorf("env: %d names, last %q", len(ev.Args.Env), ev.Args.Env[len(ev.Args.Env)-1])
	}
	if rep := verify(t, path); len(rep.Problems) != 0 {
		t.Fatal(rep.Problems)
	}
}

// TestRetentionDeletesRotatedFiles: past MaxFiles or MaxTotalBytes the
// oldest rotated files go; what is left still verifies as a chain.
func TestRetentionDeletesRotatedFiles(t *testing.T) {
	for _, opts := range []audit.Options{{MaxBytes: 600, MaxFiles: 3}, {MaxBytes: 600, MaxTotalBytes: 2000}} {
		t.Run(fmt.Sprintf("files=%d,bytes=%d", opts.MaxFiles, opts.MaxTotalBytes), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			l, err := audit.OpenWith(path, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			writeN(t, l, 100, "alice")
			rotated, _ := filepath.Glob(path + ".*")
			var total int64
			for _, f := range rotated {
				st, _ := os.Stat(f)
				total += st.Size()
			}
			if opts.MaxFiles > 0 && len(rotated) != opts.MaxFiles {
				t.Fatalf("%d rotated files kept, want %d", len(rotated), opts.MaxFiles)
			}
			if opts.MaxTotalBytes > 0 && (total > opts.MaxTotalBytes || len(rotated) == 0) {
				t.Fatalf("%d rotated files of %d bytes kept, want at most %d bytes", len(rotated), total, opts.MaxTotalBytes)
			}
			rep := verify(t, append(rotated, path)...)
			if len(rep.Problems) != 0 || rep.LastSeq != 100 || rep.Anchored {
				t.Fatalf("chain after pruning: %+v", rep)
			}
		})
	}
}

// TestTornLastLineIsRepaired: a record cut short (a full disk, a crash)
// no longer stops the log from opening: the torn bytes are cut off, a
// Repaired record says so, and the chain verifies.
func TestTornLastLineIsRepaired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l := open(t, path, 0)
	writeN(t, l, 5, "alice")
	_ = l.Close()
	torn := `{"kind":"Event","apiVersion":"audit.wsbroker.dev/v1","seq":6,"audi`
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(torn)
	_ = f.Close()

	l2, err := audit.Open(path, 0, nil)
	if err != nil {
		t.Fatalf("open after a torn write: %v", err)
	}
	writeN(t, l2, 1, "alice")
	_ = l2.Close()
	ls := lines(t, path)
	if len(ls) != 7 {
		t.Fatalf("%d lines, want 5 + repair + 1", len(ls))
	}
	var ev audit.Event
	_ = json.Unmarshal(ls[5], &ev)
	sum := sha256.Sum256([]byte(torn))
	if ev.Stage != audit.StageRepaired || ev.Seq != 6 || !strings.Contains(ev.Reason, fmt.Sprintf("%d bytes", len(torn))) ||
		ev.Args.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("repair record: %s", ls[5])
	}
	if rep := verify(t, path); len(rep.Problems) != 0 || rep.LastSeq != 7 || !rep.Anchored {
		t.Fatalf("chain after repair: %+v", rep)
	}
}

// TestFailedWriteFailsClosed: a write that fails (here /dev/full, a real
// ENOSPC) is returned, and Ready refuses calls from then on.
func TestFailedWriteFailsClosed(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	l, err := audit.OpenWith("/dev/full", audit.Options{MinFree: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Ready(); err != nil {
		t.Fatalf("ready before any write: %v", err)
	}
	if err := l.Write(audit.Event{AuditID: "a"}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a full device: %v", err)
	}
	if err := l.Ready(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("ready after a failed write: %v", err)
	}
}

// TestReadFromTheEnd: the newest records come from the end of the trail,
// across chunk and file boundaries, without reading its head (here a
// 64 MiB run of NULs no line scanner accepts).
func TestReadFromTheEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l, err := audit.OpenWith(path, audit.Options{MaxBytes: 200 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The oldest rotated file: a sparse head no one should read.
	head := path + ".00000000T000000.000000000Z"
	if err := os.WriteFile(head, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(head, 64<<20); err != nil {
		t.Fatal(err)
	}
	var bSeqs []uint64
	for i := range 3000 {
		tenant := "a"
		if i%97 == 0 {
			tenant = "b"
			bSeqs = append(bSeqs, uint64(i+1))
		}
		if err := l.Write(audit.Event{AuditID: fmt.Sprint(i), Tenant: tenant, Reason: strings.Repeat("x", i%300)}); err != nil {
			t.Fatal(err)
		}
	}
	if rotated, _ := filepath.Glob(path + ".*"); len(rotated) < 4 {
		t.Fatalf("only %d files: the test wants records over several", len(rotated))
	}
	for _, limit := range []int{1, 10, 30} {
		recs, err := l.Read(func(e *audit.Event) bool { return e.Tenant == "b" }, limit)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		want := bSeqs[len(bSeqs)-limit:]
		if len(recs) != len(want) {
			t.Fatalf("limit %d: %d records", limit, len(recs))
		}
		for i, r := range recs {
			var ev audit.Event
			if err := json.Unmarshal(r, &ev); err != nil || ev.Seq != want[i] {
				t.Fatalf("limit %d: record %d is seq %d, want %d (%v)", limit, i, ev.Seq, want[i], err)
			}
		}
	}
}

// TestReadDoesNotReadTheHeadOfTheCurrentFile: within one file too, only
// the end is read: a head no line scanner accepts (64 MiB of NULs) is
// never reached when the newest records complete the answer.
func TestReadDoesNotReadTheHeadOfTheCurrentFile(t *testing.T) {
	// A valid first record, after the NUL run.
	seed := filepath.Join(t.TempDir(), "seed.jsonl")
	writeN(t, open(t, seed, 0), 1, "alice")
	rec, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(append([]byte("\n"), rec...), 64<<20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	l := open(t, path, 0)
	writeN(t, l, 50, "alice")
	recs, err := l.Read(func(*audit.Event) bool { return true }, 20)
	if err != nil || len(recs) != 20 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	var first, last audit.Event
	_ = json.Unmarshal(recs[0], &first)
	_ = json.Unmarshal(recs[19], &last)
	if first.Seq != 32 || last.Seq != 51 {
		t.Fatalf("records %d to %d, want 32 to 51", first.Seq, last.Seq)
	}
}
