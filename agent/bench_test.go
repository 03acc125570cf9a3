package agent_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// BenchmarkExecTrue is one `true` through the agent, reaper included;
// BenchmarkForkExecTrue the same started directly, for the ratio.
func BenchmarkExecTrue(b *testing.B) {
	c, _ := serveB(b)
	for b.Loop() {
		if _, err := c.Exec(context.Background(), opsapi.ExecRequest{Command: "true"}, "/", nil, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
