package sftpops_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/sftpext"
	"github.com/wsbroker/wsbroker/remote/sftpops"
	"github.com/wsbroker/wsbroker/remote/sftpserver"
)

// opensshSftpServer is Debian's OpenSSH SFTP server, which speaks SFTP on
// its stdio: the same code sshd runs as internal-sftp.
const opensshSftpServer = "/usr/lib/openssh/sftp-server"

// server starts one SFTP server and returns a client on it and a function
// that kills the channel, as a dropped connection would.
type server struct {
	name  string
	start func(t *testing.T) (*sftp.Client, func())
}

var servers = []server{
	{"openssh", startOpenSSH},
	{"pkgsftp", startPkgSftp},
	{"wsbserver", startWsbServer}, // small writes take atomic-write@wsbroker.dev
}

func startOpenSSH(t *testing.T) (*sftp.Client, func()) {
	testutil.RequireCommand(t, opensshSftpServer)
	cmd := exec.Command(opensshSftpServer)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := sftp.NewClientPipe(out, in, sftp.UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() {
		once.Do(func() {
			// Best effort: the server may have exited already, and a
			// killed server's exit status says nothing about the test.
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() { kill(); c.Close() })
	return c, kill
}

type pipeRWC struct {
	io.Reader
	io.WriteCloser
}

func startPkgSftp(t *testing.T) (*sftp.Client, func()) {
	cr, sw := io.Pipe() // server to client
	sr, cw := io.Pipe() // client to server
	srv, err := sftp.NewServer(pipeRWC{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	// Serve ends with an error once kill closes the pipes; that is the
	// test's own doing, not a failure.
	go func() { _ = srv.Serve() }()
	c, err := sftp.NewClientPipe(cr, cw, sftp.UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	kill := func() {
		sw.CloseWithError(io.ErrClosedPipe)
		sr.CloseWithError(io.ErrClosedPipe)
	}
	t.Cleanup(func() { kill(); c.Close() })
	return c, kill
}

// startWsbServer runs the broker's own server (package sftpserver), which
// the docker backend injects into containers.
func startWsbServer(t *testing.T) (*sftp.Client, func()) {
	cr, sw := io.Pipe() // server to client
	sr, cw := io.Pipe() // client to server
	// Serve ends with an error once kill closes the pipes; that is the
	// test's own doing, not a failure.
	go func() { _ = sftpserver.Serve(sr, sw) }()
	c, err := sftp.NewClientPipe(cr, cw, sftp.UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.HasExtension(sftpext.AtomicWrite); !ok {
		t.Fatal("the server does not advertise atomic-write")
	}
	kill := func() {
		sw.CloseWithError(io.ErrClosedPipe)
		sr.CloseWithError(io.ErrClosedPipe)
	}
	t.Cleanup(func() { kill(); c.Close() })
	return c, kill
}

// each runs fn against every server, with a fresh root directory.
func each(t *testing.T, fn func(t *testing.T, fsys *sftpops.FS, root string)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			c, _ := s.start(t)
			root := t.TempDir()
			fn(t, sftpops.New(sftpops.Fixed(c), root, sftpops.Options{Logger: testutil.Logger(t)}), root)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error = %v (kind %v), want %v", err, opsapi.KindOf(err), kind)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, fsys *sftpops.FS, p string) string {
	t.Helper()
	rc, err := fsys.Open(ctx(t), p)
	must(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	must(t, err)
	return string(b)
}

func TestWriteReadModesAndKinds(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		must(t, fsys.Mkdir(ctx(t), "a/b"))
		must(t, fsys.WriteFile(ctx(t), "a/b/f", strings.NewReader("one")))
		if got := read(t, fsys, root+"/a/b/f"); got != "one" {
			t.Fatalf("read %q", got)
		}
		must(t, os.Chmod(filepath.Join(root, "a/b/f"), 0o751))
		must(t, fsys.WriteFile(ctx(t), "a/b/f", strings.NewReader("two")))
		fi, err := fsys.Stat(ctx(t), "a/b/f")
		must(t, err)
		if fi.Mode != 0o751 || fi.Size != 3 || fi.Type != opsapi.TypeFile || fi.Name != "f" {
			t.Fatalf("after replace: %+v", fi)
		}
		if got := read(t, fsys, "a/b/f"); got != "two" {
			t.Fatalf("read %q", got)
		}

		wantKind(t, fsys.WriteFile(ctx(t), "a", strings.NewReader("x")), opsapi.ErrIsDir)
		wantKind(t, fsys.WriteFile(ctx(t), "no/such/f", strings.NewReader("x")), opsapi.ErrNotExist)
		wantKind(t, fsys.WriteFile(ctx(t), "a/b/f/g", strings.NewReader("x")), opsapi.ErrNotDir)
		wantKind(t, fsys.Mkdir(ctx(t), "a/b/f"), opsapi.ErrExist)
		wantKind(t, fsys.Mkdir(ctx(t), "a/b/f/sub"), opsapi.ErrNotDir)
		must(t, fsys.Mkdir(ctx(t), "a"))
		_, err = fsys.Open(ctx(t), "a")
		wantKind(t, err, opsapi.ErrIsDir)
		_, err = fsys.Open(ctx(t), "missing")
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = fsys.Stat(ctx(t), "missing/deeper")
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = fsys.ReadDir(ctx(t), "a/b/f")
		wantKind(t, err, opsapi.ErrNotDir)
		_, err = fsys.ReadDir(ctx(t), "missing")
		wantKind(t, err, opsapi.ErrNotExist)
		wantKind(t, fsys.Access(ctx(t), "missing", opsapi.AccessRead), opsapi.ErrNotExist)
		_, err = fsys.Stat(ctx(t), "a\x00b")
		wantKind(t, err, opsapi.ErrInvalid)
	})
}

func TestSymlinks(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		must(t, fsys.Mkdir(ctx(t), "real"))
		must(t, fsys.WriteFile(ctx(t), "real/target", strings.NewReader("old")))
		must(t, os.Symlink("real/target", filepath.Join(root, "link")))
		must(t, os.Symlink("real", filepath.Join(root, "dirlink")))
		must(t, os.Symlink("nowhere", filepath.Join(root, "dangling")))

		must(t, fsys.WriteFile(ctx(t), "link", strings.NewReader("new")))
		if got := read(t, fsys, "real/target"); got != "new" {
			t.Fatalf("target %q", got)
		}
		if fi, err := os.Lstat(filepath.Join(root, "link")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("link replaced: %v %v", fi, err)
		}
		fi, err := fsys.Stat(ctx(t), "link")
		must(t, err)
		if fi.Type != opsapi.TypeFile || !fi.Symlink || fi.Size != 3 {
			t.Fatalf("stat link: %+v", fi)
		}
		infos, err := fsys.ReadDir(ctx(t), ".")
		must(t, err)
		got := map[string]opsapi.FileInfo{}
		var names []string
		for _, fi := range infos {
			got[fi.Name] = fi
			names = append(names, fi.Name)
		}
		if !slices.Equal(names, []string{"dangling", "dirlink", "link", "real"}) {
			t.Fatalf("names %v", names)
		}
		if got["dangling"].Type != opsapi.TypeSymlink || got["dirlink"].Type != opsapi.TypeDir || !got["dirlink"].Symlink {
			t.Fatalf("entries %+v", got)
		}

		want := filepath.Join(root, "real/target")
		if w, err := filepath.EvalSymlinks(want); err == nil {
			want = w
		}
		for _, p := range []string{"link", "dirlink/target", "real/../real/target"} {
			rp, err := fsys.RealPath(ctx(t), p)
			must(t, err)
			if rp != want {
				t.Errorf("RealPath(%s) = %q, want %q", p, rp, want)
			}
		}
		_, err = fsys.RealPath(ctx(t), "dangling")
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = fsys.RealPath(ctx(t), "missing")
		wantKind(t, err, opsapi.ErrNotExist)
	})
}

func TestOpenFifoDoesNotBlockTheChannel(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
		_, err := fsys.Open(ctx(t), "fifo")
		wantKind(t, err, opsapi.ErrInvalid)
		must(t, fsys.WriteFile(ctx(t), "after", strings.NewReader("ok")))
		if got := read(t, fsys, "after"); got != "ok" {
			t.Fatalf("read %q", got)
		}
	})
}

func TestAccessChecksBitsForTheIdentity(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			c, _ := s.start(t)
			root := t.TempDir()
			me := os.Getuid()
			other := &sftpops.Identity{UID: me + 4242, GIDs: []int{os.Getgid() + 4242}}
			group := &sftpops.Identity{UID: me + 4242, GIDs: []int{99999, os.Getgid()}}
			for _, f := range []struct {
				name string
				mode os.FileMode
			}{{"rw", 0o666}, {"r", 0o644}, {"gr", 0o640}, {"none", 0o600}} {
				must(t, os.WriteFile(filepath.Join(root, f.name), nil, 0o600))
				must(t, os.Chmod(filepath.Join(root, f.name), f.mode))
			}
			cases := []struct {
				id   *sftpops.Identity
				file string
				mode opsapi.AccessMode
				ok   bool
			}{
				{other, "rw", opsapi.AccessRead | opsapi.AccessWrite, true},
				{other, "r", opsapi.AccessRead, true},
				{other, "r", opsapi.AccessWrite, false},
				{other, "gr", opsapi.AccessRead, false},
				{group, "gr", opsapi.AccessRead, true},
				{group, "gr", opsapi.AccessWrite, false},
				{other, "none", opsapi.AccessRead, false},
				{&sftpops.Identity{UID: 0}, "none", opsapi.AccessRead | opsapi.AccessWrite, true},
				{nil, "none", opsapi.AccessRead, true},
			}
			for _, cs := range cases {
				fsys := sftpops.New(sftpops.Fixed(c), root, sftpops.Options{Identity: cs.id})
				err := fsys.Access(ctx(t), cs.file, cs.mode)
				if cs.ok && err != nil || !cs.ok && !errors.Is(err, opsapi.ErrPermission) {
					t.Errorf("Access(%s, %v) as %+v = %v, want ok=%v", cs.file, cs.mode, cs.id, err, cs.ok)
				}
			}
		})
	}
}

func TestGlobHonoursIgnoreFilesFromTheRoot(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		for p, content := range map[string]string{
			".gitignore":      "*.log\n",
			"src/a.go":        "",
			"src/b.log":       "",
			"src/sub/c.go":    "",
			"src/sub/.ignore": "c.go\n",
		} {
			must(t, fsys.Mkdir(ctx(t), filepath.Dir(p)))
			must(t, fsys.WriteFile(ctx(t), p, strings.NewReader(content)))
		}
		res, err := fsys.Glob(ctx(t), opsapi.GlobRequest{Pattern: "*", Dir: "src"})
		must(t, err)
		if got := strings.Join(res.Paths, " "); got != "a.go sub/ sub/.ignore" {
			t.Fatalf("glob = %q", got)
		}
		_, err = fsys.Glob(ctx(t), opsapi.GlobRequest{Pattern: "*", Dir: "missing"})
		wantKind(t, err, opsapi.ErrNotExist)
		_, err = fsys.Glob(ctx(t), opsapi.GlobRequest{Pattern: "*", Dir: "src/a.go"})
		wantKind(t, err, opsapi.ErrNotDir)
		_, err = fsys.Glob(ctx(t), opsapi.GlobRequest{Pattern: "[", Dir: "."})
		wantKind(t, err, opsapi.ErrInvalid)
	})
}

func TestWriteFailuresLeaveOldContentAndNoTempFile(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		must(t, fsys.WriteFile(ctx(t), "f", strings.NewReader("old")))
		r := io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), failing{})
		if err := fsys.WriteFile(ctx(t), "f", r); err == nil {
			t.Fatal("failing reader: nil error")
		}
		// Failing within the first 64 KiB: the one-request write's path.
		if err := fsys.WriteFile(ctx(t), "f", io.MultiReader(strings.NewReader("new"), failing{})); err == nil {
			t.Fatal("small failing reader: nil error")
		}
		c, cancel := context.WithCancel(ctx(t))
		cancel()
		wantKind(t, fsys.WriteFile(c, "f", strings.NewReader("new")), opsapi.ErrCanceled)
		waitNoTemp(t, root)
		if got := read(t, fsys, "f"); got != "old" {
			t.Fatalf("content %q", got)
		}
	})
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("reader broke") }

// waitNoTemp waits for the background removal of temporary files.
func waitNoTemp(t *testing.T, root string) {
	t.Helper()
	var names []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		entries, err := os.ReadDir(root)
		must(t, err)
		names = names[:0]
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, ".tmp-") }) {
			return
		}
	}
	t.Fatalf("temporary files left: %v", names)
}

// TestLostChannel: a read retries once on a fresh channel; a write that
// loses its channel mid-way fails with ErrUnavailable, leaves the target
// as it was, and its temporary file is removed by the next write.
func TestLostChannel(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			first, kill := s.start(t)
			second, _ := s.start(t)
			var mu sync.Mutex
			current := first
			clients := func(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
				mu.Lock()
				defer mu.Unlock()
				if broken != nil && broken == current {
					current = second
				}
				return current, nil
			}
			root := t.TempDir()
			fsys := sftpops.New(clients, root, sftpops.Options{Logger: testutil.Logger(t)})
			must(t, fsys.WriteFile(ctx(t), "f", strings.NewReader("old")))

			r := &killingReader{n: 8 << 20, killAt: 1 << 20, kill: kill}
			err := fsys.WriteFile(ctx(t), "f", r)
			wantKind(t, err, opsapi.ErrUnavailable)
			if got, _ := os.ReadFile(filepath.Join(root, "f")); string(got) != "old" {
				t.Fatalf("target after a lost write: %q", got)
			}

			// A read on the dead channel moves to the fresh one.
			if got := read(t, fsys, "f"); got != "old" {
				t.Fatalf("read after loss: %q", got)
			}
			if len(fsys.Orphans()) != 1 {
				t.Fatalf("orphans = %v, want the one temporary file", fsys.Orphans())
			}
			must(t, fsys.WriteFile(ctx(t), "f", strings.NewReader("new")))
			if len(fsys.Orphans()) != 0 {
				t.Fatalf("orphans after the next write: %v", fsys.Orphans())
			}
			waitNoTemp(t, root)
			if got := read(t, fsys, "f"); got != "new" {
				t.Fatalf("read %q", got)
			}
		})
	}
}

// TestLostChannelMidRead: a large read whose channel dies part way fails
// with ErrUnavailable, through Read and through WriteTo, after handing
// over only bytes of the file; it never ends as if the file were shorter.
func TestLostChannelMidRead(t *testing.T) {
	for _, s := range servers {
		for _, how := range []string{"Read", "WriteTo"} {
			t.Run(s.name+"/"+how, func(t *testing.T) {
				c, kill := s.start(t)
				root := t.TempDir()
				want := make([]byte, 16<<20)
				for i := range want {
					want[i] = byte(i*7 + i/4096)
				}
				must(t, os.WriteFile(filepath.Join(root, "big"), want, 0o644))
				fsys := sftpops.New(sftpops.Fixed(c), root, sftpops.Options{Logger: testutil.Logger(t)})
				rc, err := fsys.Open(ctx(t), "big")
				must(t, err)
				defer rc.Close()
				head := make([]byte, 1<<20)
				_, err = io.ReadFull(rc, head)
				must(t, err)
				kill()
				var rest bytes.Buffer
				if how == "Read" {
					_, err = io.Copy(&rest, struct{ io.Reader }{rc})
				} else {
					_, err = io.Copy(&rest, rc)
				}
				wantKind(t, err, opsapi.ErrUnavailable)
				got := append(head, rest.Bytes()...)
				if len(got) >= len(want) || !bytes.Equal(got, want[:len(got)]) {
					t.Fatalf("read %d of %d bytes before the error (or different content)", len(got), len(want))
				}
			})
		}
	}
}

// killingReader yields n zero bytes and kills the channel after killAt.
type killingReader struct {
	n, read, killAt int
	kill            func()
}

func (r *killingReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	if r.read >= r.killAt && r.kill != nil {
		r.kill()
		r.kill = nil
	}
	k := min(len(p), r.n-r.read)
	clear(p[:k])
	r.read += k
	return k, nil
}

// TestReadsLargeAndChangingFiles: a large file comes back whole through
// Read and through WriteTo (io.Copy's path, concurrent requests); a file
// read while it shrinks ends early without an error.
func TestReadsLargeAndChangingFiles(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		want := make([]byte, 8<<20+123)
		for i := range want {
			want[i] = byte(i*7 + i/4096)
		}
		must(t, os.WriteFile(filepath.Join(root, "big"), want, 0o644))
		if got := read(t, fsys, "big"); got != string(want) {
			t.Fatalf("ReadAll: %d bytes, want %d (or different content)", len(got), len(want))
		}
		rc, err := fsys.Open(ctx(t), "big")
		must(t, err)
		head := make([]byte, 1000)
		_, err = io.ReadFull(rc, head)
		must(t, err)
		var rest bytes.Buffer
		_, err = io.Copy(&rest, rc) // WriteTo
		must(t, err)
		must(t, rc.Close())
		if got := append(head, rest.Bytes()...); !bytes.Equal(got, want) {
			t.Fatalf("read then copy: %d bytes, want %d (or different content)", len(got), len(want))
		}

		// Read ahead of the stat's size: a large file that grows after
		// its stat is read at least to that size and then on, as far as
		// the reads saw it grow; what comes is the file's content.
		must(t, os.WriteFile(filepath.Join(root, "grows"), want[:1<<20], 0o644))
		rc, err = fsys.Open(ctx(t), "grows")
		must(t, err)
		f, err := os.OpenFile(filepath.Join(root, "grows"), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = f.Write(want[1<<20:])
		must(t, errors.Join(err, f.Close()))
		got, err := io.ReadAll(rc)
		must(t, err)
		rc.Close()
		if len(got) < 1<<20 || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("a growing file read as %d bytes (or different content)", len(got))
		}

		// A file that shrinks after its open: the read stops where the
		// file ended when each read reached the server. Read-ahead may
		// have asked for (and got) more before the truncate; what comes
		// is still the file's content, never past it.
		must(t, os.WriteFile(filepath.Join(root, "shrinks"), want[:100<<10], 0o644))
		rc, err = fsys.Open(ctx(t), "shrinks")
		must(t, err)
		must(t, os.Truncate(filepath.Join(root, "shrinks"), 10))
		got, err = io.ReadAll(rc)
		must(t, err)
		rc.Close()
		if len(got) < 10 || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("shrunk file read as %d bytes (or different content)", len(got))
		}
	})
}

// TestWriteKeepsModeInEachDirectory: the old file's mode survives a
// rewrite whether or not it is the mode new files get, in two directories
// one after the other (the mode new files get is learned per directory).
func TestWriteKeepsModeInEachDirectory(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		must(t, fsys.Mkdir(ctx(t), "d1"))
		must(t, fsys.Mkdir(ctx(t), "d2"))
		for _, dir := range []string{"d1", "d2"} {
			for _, mode := range []os.FileMode{0o600, 0o755, 0o600} {
				p := dir + "/f"
				must(t, fsys.WriteFile(ctx(t), p, strings.NewReader("x")))
				must(t, os.Chmod(filepath.Join(root, p), mode))
				must(t, fsys.WriteFile(ctx(t), p, strings.NewReader("y")))
				fi, err := os.Stat(filepath.Join(root, p))
				must(t, err)
				if fi.Mode().Perm() != mode {
					t.Fatalf("%s: mode %v after rewrite, want %v", p, fi.Mode().Perm(), mode)
				}
				// A rewrite of a file with the default mode keeps it too.
				must(t, os.Remove(filepath.Join(root, p)))
				must(t, fsys.WriteFile(ctx(t), p, strings.NewReader("z")))
				def, err := os.Stat(filepath.Join(root, p))
				must(t, err)
				must(t, fsys.WriteFile(ctx(t), p, strings.NewReader("w")))
				again, err := os.Stat(filepath.Join(root, p))
				must(t, err)
				if again.Mode() != def.Mode() {
					t.Fatalf("%s: default mode %v became %v", p, def.Mode(), again.Mode())
				}
			}
		}
		waitNoTemp(t, filepath.Join(root, "d1"))
	})
}

// TestReadsPseudoFiles: a file whose stat says size 0 but that has content
// (procfs, cgroupfs) is read to its end.
func TestReadsPseudoFiles(t *testing.T) {
	each(t, func(t *testing.T, fsys *sftpops.FS, root string) {
		got := read(t, fsys, "/proc/self/status")
		if !strings.Contains(got, "Pid:") {
			t.Fatalf("/proc/self/status read as %q", got)
		}
		must(t, os.WriteFile(filepath.Join(root, "empty"), nil, 0o644))
		if got := read(t, fsys, "empty"); got != "" {
			t.Fatalf("empty file read as %q", got)
		}
	})
}

// TestShortRepliesAreNotTheEnd: a server whose reads are shorter than the
// client asks for (here pkg/sftp's, which caps a reply at 32 KiB, under a
// client asking 64 KiB) still gives whole files, large, small and growing
// past their stat; pkg/sftp's ReadAt alone takes the first short reply
// for the end and returned 32 KiB of 3 MiB without an error.
func TestShortRepliesAreNotTheEnd(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := sftp.NewServer(pipeRWC{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	c, err := sftp.NewClientPipe(cr, cw, sftp.UseConcurrentWrites(true), sftp.MaxPacketUnchecked(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close(); sr.Close(); c.Close() })
	root := t.TempDir()
	fsys := sftpops.New(sftpops.Fixed(c), root, sftpops.Options{Logger: testutil.Logger(t)})
	want := make([]byte, 3<<20+123)
	for i := range want {
		want[i] = byte(i*13 + i/4096)
	}
	for _, n := range []int{len(want), 50 << 10, 40 << 10} {
		must(t, os.WriteFile(filepath.Join(root, "f"), want[:n], 0o644))
		if got := read(t, fsys, "f"); got != string(want[:n]) {
			t.Fatalf("a %d-byte file read as %d bytes", n, len(got))
		}
	}
	// A small file that grows after its stat is read to its new end.
	must(t, os.WriteFile(filepath.Join(root, "grows"), want[:20<<10], 0o644))
	rc, err := fsys.Open(ctx(t), "grows")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "grows"), want[:30<<10], 0o644))
	got, err := io.ReadAll(rc)
	must(t, err)
	rc.Close()
	if len(got) < 20<<10 || !bytes.Equal(got, want[:len(got)]) {
		t.Fatalf("a growing file read as %d bytes", len(got))
	}
}
