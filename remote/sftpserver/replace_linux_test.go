package sftpserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A write over an existing file swaps the new one in and unlinks the old:
// the path gets a new inode, a hard link elsewhere keeps the old content,
// and nothing is left beside it, synced or not.
func TestAtomicWriteOverAFileLeavesOnlyTheNewOne(t *testing.T) {
	for _, sync := range []bool{false, true} {
		dir := t.TempDir()
		p, other := filepath.Join(dir, "f"), filepath.Join(dir, "other-link")
		if err := os.WriteFile(p, []byte("old"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(p, other); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Stat(p)
		if err := AtomicWrite(p, strings.NewReader("new"), sync); err != nil {
			t.Fatal(err)
		}
		wantContent(t, p, "new")
		wantContent(t, other, "old")
		after, _ := os.Stat(p)
		if os.SameFile(before, after) || after.Mode().Perm() != 0o640 {
			t.Fatalf("sync=%v: same inode %v, mode %v: want a new file with mode 0640", sync, os.SameFile(before, after), after.Mode().Perm())
		}
		if st := before.Sys().(*syscall.Stat_t); st.Nlink != 2 {
			t.Fatalf("the old file had %d links before", st.Nlink)
		}
		if fi, _ := os.Stat(other); fi.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Fatalf("sync=%v: the old file keeps %d links, want only the other one", sync, fi.Sys().(*syscall.Stat_t).Nlink)
		}
		wantNoTemp(t, dir)
	}
}

// A directory put at the target after it was looked at is swapped out and
// then back: the write fails as a rename over it would, and both are left
// as they were.
func TestReplacePutsBackADirectory(t *testing.T) {
	dir := t.TempDir()
	tmp, target := filepath.Join(dir, "tmp"), filepath.Join(dir, "target")
	if err := os.WriteFile(tmp, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "inside"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := replace(tmp, target, true, false)
	if !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("replace over a directory: %v, want EISDIR", err)
	}
	wantContent(t, filepath.Join(target, "inside"), "kept")
	wantContent(t, tmp, "new")
}
