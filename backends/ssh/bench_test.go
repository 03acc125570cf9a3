package ssh_test

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
	"github.com/wsbroker/wsbroker/opsapi"
)

// p50 runs op b.N times and reports the median in ms beside the mean.
func p50(b *testing.B, op func()) {
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		op()
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkLoopback measures, in one run over loopback OpenSSH: a small
// file read through the workspace (SFTP open, read, close), bash `true`
// through Exec (wrapper, one session), and a raw session running `true`.
func BenchmarkLoopback(b *testing.B) {
	srv := sshtest.Start(b)
	bk := newBackend(b, srv)
	raw, err := bk.Create(b.Context(), opsapi.WorkspaceSpec{ID: "bench", Options: rootOpts(srv, srv.WorkDir(b)+"/ws")})
	if err != nil {
		b.Fatal(err)
	}
	ws := raw.(opsapi.Operations)
	if err := ws.WriteFile(b.Context(), "small.txt", strings.NewReader(strings.Repeat("x", 1024))); err != nil {
		b.Fatal(err)
	}
	b.Run("SmallFileRead", func(b *testing.B) {
		p50(b, func() {
			rc, err := ws.Open(b.Context(), "small.txt")
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.Copy(io.Discard, rc); n != 1024 {
				b.Fatal("short read")
			}
			rc.Close()
		})
	})
	b.Run("ExecTrue", func(b *testing.B) {
		p50(b, func() {
			if res, err := ws.Exec(b.Context(), opsapi.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		})
	})
	b.Run("RawSessionTrue", func(b *testing.B) {
		cfg, err := srv.ClientConfig()
		if err != nil {
			b.Fatal(err)
		}
		c, err := ssh.Dial("tcp", srv.Addr, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		p50(b, func() {
			s, err := c.NewSession()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Run("true"); err != nil {
				b.Fatal(err)
			}
		})
	})
}
