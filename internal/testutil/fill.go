package testutil

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// FillDisk writes the file name until its filesystem is full (ENOSPC);
// any other error fails the test.
func FillDisk(t testing.TB, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
