package execpump

import (
	"os"
	"testing"
)

func TestPipePendingCountsUnreadBytes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pending := PipePending(r)
	if n := pending(); n != 0 {
		t.Fatalf("empty pipe: %d pending", n)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 5 {
		t.Fatalf("after 5 bytes: %d pending", n)
	}
	if _, err := r.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 0 {
		t.Fatalf("after reading them: %d pending", n)
	}
}
