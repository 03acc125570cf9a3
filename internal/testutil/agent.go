package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var agentOnce struct {
	sync.Once
	path string
	err  error
	out  []byte
}

// AgentBinary builds the in-box agent (cmd/wsb-agent, static) once
// per test process and returns its path; it is removed when the process
// ends only by the system's temporary-file cleanup, as go test's own.
func AgentBinary(t testing.TB) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wsb-agent-")
		if err != nil {
			agentOnce.err = err
			return
		}
		p := filepath.Join(dir, "wsb-agent")
		build := exec.Command("go", "build", "-o", p, "github.com/wsbroker/wsbroker/cmd/wsb-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		agentOnce.out, agentOnce.err = build.CombinedOutput()
		agentOnce.path = p
	})
	if agentOnce.err != nil {
		t.Fatalf("building the agent: %v\n%s", agentOnce.err, agentOnce.out)
	}
	return agentOnce.path
}
