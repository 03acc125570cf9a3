package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// localRaw is the floor beneath the local backend: the same calls made
// with plain os and os/exec on a directory, with no confinement, no
// broker and no tool semantics. It offers only the ops that have a raw
// equivalent.
func localRaw() Target {
	return Target{Name: "local/raw", Backend: "local", Via: ViaRaw,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			dir, err := os.MkdirTemp(env.TempDir, "raw-")
			if err != nil {
				return nil, err
			}
			if err := seed(ctx, rawDir(dir)); err != nil {
				return nil, errors.Join(err, os.RemoveAll(dir))
			}
			rg, err := exec.LookPath("rg")
			if err != nil {
				return nil, errors.Join(err, os.RemoveAll(dir))
			}
			return &Session{
				PID:       os.Getpid(),
				NewClient: func(i int) (Client, error) { return rawClient(rawDir(dir), rg, env.Config, i), nil },
				Close:     func(context.Context) error { return os.RemoveAll(dir) },
			}, nil
		}}
}

// rawDir is a directory written with plain os calls; it satisfies
// opsapi.WriteOperations so seed can fill it.
type rawDir string

func (d rawDir) path(p string) string { return filepath.Join(string(d), p) }

func (d rawDir) Mkdir(_ context.Context, p string) error { return os.MkdirAll(d.path(p), 0o755) }

// WriteFile replaces p atomically (temporary file and rename), as the
// backend does.
func (d rawDir) WriteFile(_ context.Context, p string, r io.Reader) error {
	f, err := os.CreateTemp(filepath.Dir(d.path(p)), ".tmp-")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), d.path(p))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func rawClient(d rawDir, rg string, cfg Config, i int) Client {
	own := fmt.Sprintf("clients/c%03d.txt", i)
	run := func(ctx context.Context, stdout io.Writer, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = string(d)
		cmd.Stdout = stdout
		return cmd.Run()
	}
	wide := &wideTree{}
	return Client{
		opRead4K: func(context.Context) error {
			b, err := os.ReadFile(d.path(file4K))
			if err == nil && len(b) != size4K {
				err = fmt.Errorf("read %d bytes, want %d", len(b), size4K)
			}
			return err
		},
		opWrite4K: func(ctx context.Context) error {
			return d.WriteFile(ctx, own, bytes.NewReader(content4K))
		},
		opStat: func(context.Context) error {
			_, err := os.Stat(d.path(file4K))
			return err
		},
		opReadDir: func(context.Context) error {
			_, err := os.ReadDir(d.path(treeDir + "/pkg0"))
			return err
		},
		opReadDirWide: func(ctx context.Context) error {
			if err := wide.ensure(ctx, d); err != nil {
				return err
			}
			_, err := os.ReadDir(d.path(wideDir + "/d0"))
			return err
		},
		opExecTrue: func(ctx context.Context) error {
			return run(ctx, nil, "/bin/bash", "-c", "true")
		},
		opSearchWide: func(ctx context.Context) error {
			if err := wide.ensure(ctx, d); err != nil {
				return err
			}
			return run(ctx, io.Discard, rg, "--json", "--line-number", "--color=never", "--hidden", "--no-config",
				"--fixed-strings", "--", wideNeedle, wideDir)
		},
		opSearch: func(ctx context.Context) error {
			return run(ctx, io.Discard, rg, "--json", "--line-number", "--color=never", "--hidden", "--no-config",
				"--", searchRegex, treeDir+"/pkg1")
		},
		streamBase64: func(ctx context.Context) error {
			var n countWriter
			err := run(ctx, &n, "/bin/bash", "-c", fmt.Sprintf("head -c %d /dev/zero | base64", cfg.StreamBytes))
			if want := base64Len(cfg.StreamBytes); err == nil && int64(n) != want {
				err = fmt.Errorf("base64 wrote %d bytes, want %d", n, want)
			}
			return err
		},
	}
}

// countWriter counts and discards.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
