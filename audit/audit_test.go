package audit_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
)

func writeN(t *testing.T, l *audit.Log, n int, tenant string) {
	t.Helper()
	for i := range n {
		_ = l.Write(audit.Event{AuditID: "r" + string(rune('a'+i%26)), Stage: audit.StageResponseComplete, Tenant: tenant, Verb: "GET"})
	}
}

func open(t *testing.T, path string, max int64) *audit.Log {
	t.Helper()
	l, err := audit.Open(path, max, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func verify(t *testing.T, files ...string) audit.Report {
	t.Helper()
	rep, err := audit.Verify(files...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimRight(b, "\n"), []byte("\n"))
}

func rewrite(t *testing.T, path string, ls [][]byte) {
	t.Helper()
	var b []byte
	for _, l := range ls {
		b = append(b, bytes.TrimRight(l, "\n")...)
		b = append(b, '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestChainVerifiesAndSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l := open(t, path, 0)
	writeN(t, l, 5, "alice")
	_ = l.Close()
	l2 := open(t, path, 0) // a restart continues the chain
	writeN(t, l2, 3, "bob")
	rep := verify(t, path)
	if len(rep.Problems) != 0 || rep.Records != 8 || !rep.Anchored || rep.LastSeq != 8 {
		t.Fatalf("report %+v", rep)
	}
}

// TestTamperDetected edits, removes and reorders records: each is found.
func TestTamperDetected(t *testing.T) {
	cases := map[string]func([][]byte) [][]byte{
		"edited tenant": func(ls [][]byte) [][]byte {
			ls[2] = bytes.Replace(ls[2], []byte(`"tenant":"alice"`), []byte(`"tenant":"mallory"`), 1)
			return ls
		},
		"edited and rehashed alone": func(ls [][]byte) [][]byte {
			// Changing a field and leaving the hash breaks the record;
			// there is no way to re-seal it without breaking the next.
			ls[1] = bytes.Replace(ls[1], []byte(`"verb":"GET"`), []byte(`"verb":"PUT"`), 1)
			return ls
		},
		"removed": func(ls [][]byte) [][]byte { return append(ls[:2:2], ls[3:]...) },
		"reordered": func(ls [][]byte) [][]byte {
			ls[1], ls[2] = ls[2], ls[1]
			return ls
		},
		"first removed": func(ls [][]byte) [][]byte { return ls[1:] },
		"field added": func(ls [][]byte) [][]byte {
			ls[3] = bytes.Replace(ls[3], []byte(`{"kind"`), []byte(`{"x":1,"kind"`), 1)
			return ls
		},
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			l := open(t, path, 0)
			writeN(t, l, 6, "alice")
			_ = l.Close()
			if rep := verify(t, path); len(rep.Problems) != 0 {
				t.Fatalf("untouched chain has problems: %v", rep.Problems)
			}
			rewrite(t, path, tamper(lines(t, path)))
			rep := verify(t, path)
			if name == "first removed" {
				// Without the start, the file no longer begins at genesis.
				if rep.Anchored {
					t.Fatal("a chain missing its first record still reads as anchored")
				}
				return
			}
			if len(rep.Problems) == 0 {
				t.Fatalf("%s not detected", name)
			}
		})
	}
}

// TestRotationKeepsTheChain writes past the size limit several times; the
// files verify as one chain, and removing a middle file is found.
func TestRotationKeepsTheChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l := open(t, path, 2048)
	writeN(t, l, 40, "alice")
	_ = l.Close()
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) < 2 {
		t.Fatalf("expected rotations, got %v", rotated)
	}
	all := append(rotated, path)
	rep := verify(t, all...)
	if len(rep.Problems) != 0 || rep.Records != 40 || !rep.Anchored {
		t.Fatalf("report %+v", rep)
	}
	missing := append(append([]string{}, all[:1]...), all[2:]...)
	if rep := verify(t, missing...); len(rep.Problems) == 0 {
		t.Fatal("a removed middle file was not detected")
	}
	// Reopening continues from the newest record.
	l2 := open(t, path, 2048)
	writeN(t, l2, 1, "bob")
	rotated, _ = filepath.Glob(path + ".*")
	if rep := verify(t, append(rotated, path)...); len(rep.Problems) != 0 || rep.Records != 41 {
		t.Fatalf("after reopen: %+v", rep)
	}
}

func TestReadFiltersAndLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l := open(t, path, 1024)
	writeN(t, l, 10, "alice")
	writeN(t, l, 4, "bob")
	recs, err := l.Read(func(e *audit.Event) bool { return e.Tenant == "alice" }, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if !strings.Contains(string(r), `"tenant":"alice"`) || !strings.Contains(string(r), `"hash":"`) {
			t.Fatalf("record %s", r)
		}
	}
	if !strings.Contains(string(recs[2]), `"seq":10`) {
		t.Fatalf("newest alice record should be seq 10: %s", recs[2])
	}
}
