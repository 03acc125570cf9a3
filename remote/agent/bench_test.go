package agent_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// BenchmarkSFTPRead8M reads an 8 MiB file over the agent's SFTP, TLS and
// yamux included, as the docker backend's read does.
func BenchmarkSFTPRead8M(b *testing.B) {
	c, _ := serveB(b)
	p := filepath.Join(b.TempDir(), "big")
	if err := os.WriteFile(p, make([]byte, 8<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	sc, err := c.SFTP(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(8 << 20)
	for b.Loop() {
		f, err := sc.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := f.WriteTo(io.Discard); err != nil || n != 8<<20 {
			b.Fatal(n, err)
		}
		f.Close()
	}
}
