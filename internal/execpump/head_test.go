package execpump

import "testing"

func TestHeadKeepsTheFirstBytes(t *testing.T) {
	h := &Head{Max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := h.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := h.String(); got != "abcde" {
		t.Fatalf("String() = %q, want %q", got, "abcde")
	}
}
