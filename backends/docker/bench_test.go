package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wsbroker/wsbroker/backends/docker"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tarball"
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

// BenchmarkEngine measures, in one run against the local engine: a small
// file read and write through the workspace (SFTP over the long-lived
// exec), bash `true` through Exec (wrapper, one exec), and the raw Docker
// API baselines: one exec running `true`, and one exec running `cat` per
// read (what the SFTP channel replaces). Create measures a new workspace
// until its first command has completed. Extract100MiB lands bench's
// archive.up tar (100 files of 1 MiB) with package tarball, in-process.
func BenchmarkEngine(b *testing.B) {
	bk := newBackend(b)
	ws := create(b, bk, nil)
	const size = 1024
	if err := ws.WriteFile(b.Context(), "small.txt", strings.NewReader(strings.Repeat("x", size))); err != nil {
		b.Fatal(err)
	}
	api, err := client.NewClientWithOpts(client.WithHost(docker.DefaultHost), client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()

	b.Run("SmallFileRead", func(b *testing.B) {
		p50(b, func() {
			rc, err := ws.Open(b.Context(), "small.txt")
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.Copy(io.Discard, rc); n != size {
				b.Fatal("short read")
			}
			rc.Close()
		})
	})
	b.Run("SmallFileWrite", func(b *testing.B) {
		p50(b, func() {
			if err := ws.WriteFile(b.Context(), "w.txt", strings.NewReader(strings.Repeat("y", size))); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Write1MiB", func(b *testing.B) {
		data := strings.Repeat("w", 1<<20)
		b.SetBytes(int64(len(data)))
		p50(b, func() {
			if err := ws.WriteFile(b.Context(), "w1m.bin", strings.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("ReadDir1k", func(b *testing.B) {
		if _, err := ws.Exec(b.Context(), opsapi.ExecRequest{Command: "mkdir -p wide && cd wide && seq 1000 | xargs touch"}); err != nil {
			b.Fatal(err)
		}
		p50(b, func() {
			if fis, err := ws.ReadDir(b.Context(), "wide"); err != nil || len(fis) != 1000 {
				b.Fatal(len(fis), err)
			}
		})
	})
	b.Run("Read8MiB", func(b *testing.B) {
		const big = 8 << 20
		if err := ws.WriteFile(b.Context(), "big.bin", strings.NewReader(strings.Repeat("z", big))); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(big)
		p50(b, func() {
			rc, err := ws.Open(b.Context(), "big.bin")
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.Copy(io.Discard, rc); n != big {
				b.Fatal("short read")
			}
			rc.Close()
		})
	})
	b.Run("Extract100MiB", func(b *testing.B) {
		tarb := tarOf(b, 100, 1<<20)
		b.SetBytes(100 << 20)
		tree := opsapi.TreeOperations(ws)
		i := 0
		p50(b, func() {
			i++
			rep, err := tarball.Extract(b.Context(), bytes.NewReader(tarb), tarball.None, tarball.Dest{Files: ws, Tree: tree},
				fmt.Sprintf("x%d", i), tarball.Limits{MaxEntries: 1 << 20, MaxBytes: 1 << 40})
			if err != nil || rep.Files != 100 {
				b.Fatal(rep, err)
			}
			b.StopTimer()
			sh(b, ws, fmt.Sprintf("rm -rf x%d", i))
			b.StartTimer()
		})
	})
	b.Run("ExecTrue", func(b *testing.B) {
		p50(b, func() {
			if res, err := ws.Exec(b.Context(), opsapi.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		})
	})
	b.Run("RawAPIExecTrue", func(b *testing.B) {
		p50(b, func() { rawExec(b, api, ws.ContainerID(), "true", 0) })
	})
	b.Run("RawAPIExecCatPerRead", func(b *testing.B) {
		p50(b, func() { rawExec(b, api, ws.ContainerID(), "cat /workspace/small.txt", size) })
	})
	b.Run("CreateToFirstCommand", func(b *testing.B) {
		p50(b, func() {
			w, err := bk.Create(b.Context(), opsapi.WorkspaceSpec{ID: newID(b)})
			if err != nil {
				b.Fatal(err)
			}
			if res, err := w.(opsapi.BashOperations).Exec(b.Context(), opsapi.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			b.StopTimer()
			if err := w.(opsapi.Destroyer).Destroy(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		})
	})
}

// tarOf is a tar of n files of size random bytes, 64 to a directory, as
// bench's archive rows send.
func tarOf(b testing.TB, n, size int) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := make([]byte, size)
	for i := range n {
		rand.Read(data)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%02d/f%04d.bin", i/64, i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// rawExec is one plain Docker API exec round trip: create, attach (which
// starts it), read to the end, inspect for the exit code.
func rawExec(b *testing.B, api *client.Client, cid, command string, want int64) {
	ctx := b.Context()
	ex, err := api.ContainerExecCreate(ctx, cid, container.ExecOptions{Cmd: []string{"sh", "-c", command}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		b.Fatal(err)
	}
	hj, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n, err := stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
	hj.Close()
	if err != nil || n != want {
		b.Fatalf("read %d bytes, %v", n, err)
	}
	ins, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil || ins.ExitCode != 0 {
		b.Fatal(ins, err)
	}
}
