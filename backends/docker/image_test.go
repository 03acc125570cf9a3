package docker_test

import (
	"strings"
	"testing"
)

// TestImageRunsWhatAgentsReachForFirst: a model's first commands are
// `python3 x.py`, `curl` and `make`; the workspace image must answer them
// rather than exit 127 (the README's first docker example runs python3).
func TestImageRunsWhatAgentsReachForFirst(t *testing.T) {
	ws := create(t, newBackend(t), nil)
	sh(t, ws, `printf 'print("hi from python")\n' > hello.py`)
	if got := sh(t, ws, "python3 hello.py"); got != "hi from python\n" {
		t.Errorf("python3 hello.py printed %q", got)
	}
	// curl reads a local file: the workspace has no network by default.
	sh(t, ws, "echo fetched > page.txt")
	if got := sh(t, ws, "curl -sS file://$PWD/page.txt"); got != "fetched\n" {
		t.Errorf("curl file:// printed %q", got)
	}
	sh(t, ws, `printf 'all:\n\t@echo made\n' > Makefile`)
	if got := sh(t, ws, "make"); !strings.Contains(got, "made") {
		t.Errorf("make printed %q", got)
	}
}
