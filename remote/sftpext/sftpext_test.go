package sftpext

import (
	"strings"
	"testing"
)

func TestReadSmallPathRoundTrip(t *testing.T) {
	for _, p := range []string{"/a/b", "/", "rel", "/with space/ü"} {
		got, ok := CutReadSmallPath(ReadSmallPath(p))
		if !ok || got != p {
			t.Errorf("CutReadSmallPath(ReadSmallPath(%q)) = %q, %v", p, got, ok)
		}
	}
	if _, ok := CutReadSmallPath("/a/b"); ok {
		t.Error("a plain path taken for a ReadSmall request")
	}
}

func TestTempName(t *testing.T) {
	a, b := TempName("f.txt"), TempName("f.txt")
	if a == b || !strings.HasPrefix(a, ".f.txt"+TempSuffix) {
		t.Errorf("TempName = %q, %q: want hidden, marked and random", a, b)
	}
	if n := len(TempName(strings.Repeat("x", 300))); n > 255 {
		t.Errorf("a long base gives a %d-byte name, over NAME_MAX", n)
	}
}
