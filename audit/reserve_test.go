package audit_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestReserveKeepsRoomWhenTheDiskIsFull: on a small tmpfs that something
// else fills to the last byte (as a workspace sharing the state
// filesystem can), the audit still writes hundreds of records out of its
// reserve, also after a reopen, Ready refuses for space (ENOSPC, so a
// caller can tell), and once the filler is gone Ready admits again and the reserve is whole,
// with no reopen; the chain verifies throughout.
func TestReserveKeepsRoomWhenTheDiskIsFull(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "cannot mount a tmpfs: "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	path := filepath.Join(dir, "audit.jsonl")
	const reserve = 512 << 10
	l, err := audit.OpenWith(path, audit.Options{MinFree: 64 << 10, Reserve: reserve}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if got := l.Reserved(); got != reserve {
		t.Fatalf("reserve after open: %d bytes, want %d", got, reserve)
	}
	filler := filepath.Join(dir, "filler")
	testutil.FillDisk(t, filler)
	if err := l.Ready(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Ready on a full filesystem: %v, want ENOSPC", err)
	}
	const n = 300 // ~500 bytes each: ~150 KiB, well inside the reserve
	for i := range n {
		ev := audit.Event{AuditID: fmt.Sprintf("full-%d", i), Reason: strings.Repeat("r", 300)}
		if err := l.Write(ev); err != nil {
			t.Fatalf("record %d on a full filesystem: %v", i, err)
		}
	}
	left := l.Reserved()
	if left >= reserve || left == 0 {
		t.Fatalf("reserve after writing into it: %d bytes", left)
	}
	// A restart on the full filesystem: what is left of the reserve is
	// still the audit's, and the chain goes on into it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = audit.OpenWith(path, audit.Options{MinFree: 64 << 10, Reserve: reserve}, nil); err != nil {
		t.Fatalf("reopening on a full filesystem: %v", err)
	}
	if got := l.Reserved(); got != left {
		t.Fatalf("reserve after reopening: %d bytes, want the %d left", got, left)
	}
	if err := l.Write(audit.Event{AuditID: "after-restart"}); err != nil {
		t.Fatalf("a record after reopening on a full filesystem: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.Ready(); err != nil {
		t.Fatalf("Ready with room again: %v", err)
	}
	if got := l.Reserved(); got != reserve {
		t.Fatalf("reserve with room again: %d bytes, want %d", got, reserve)
	}
	if rep := verify(t, path); len(rep.Problems) != 0 || rep.Records != n+1 {
		t.Fatalf("chain: %d records, problems %v", rep.Records, rep.Problems)
	}
}
