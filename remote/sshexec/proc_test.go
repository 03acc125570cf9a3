package sshexec

import (
	"os/exec"
	"testing"
)

// TestCommandLineKeepsArguments: the line a login shell runs gives the
// script the same positional parameters as `sh -c SCRIPT NAME ARGS`, and
// any other argv the same words, quotes and blanks included.
func TestCommandLineKeepsArguments(t *testing.T) {
	args := []string{"a b", "it's", `"q"`, "$HOME", ""}
	for _, argv := range [][]string{
		append([]string{"sh", "-c", `printf '[%s]' "$@"`, "name"}, args...),
		append([]string{"printf", "[%s]"}, args...),
	} {
		out, err := exec.Command("sh", "-c", CommandLine(argv)).Output()
		if err != nil {
			t.Fatalf("%q: %v", CommandLine(argv), err)
		}
		if want := `[a b][it's]["q"][$HOME][]`; string(out) != want {
			t.Errorf("%q printed %s, want %s", CommandLine(argv), out, want)
		}
	}
	if n := signalNumber("KILL"); n != 9 {
		t.Errorf("signalNumber(KILL) = %d", n)
	}
}
