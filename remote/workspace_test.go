package remote_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/internal/execconf"
	"github.com/wsbroker/wsbroker/internal/rgjson"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agent"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/sftpops"
)

// fakeBox is a Transport whose agent runs in this process over a
// net.Pipe; its server ends are kept so a test can cut the connection.
type fakeBox struct {
	t        *testing.T
	bin      string // the agent binary the in-process agent re-executes as each command's reaper
	starts   atomic.Int64
	delay    time.Duration
	fail     atomic.Pointer[error] // StartAgent's error, when set
	vanished string
	destroys atomic.Int64
	destErr  error

	mu    sync.Mutex
	conns []net.Conn
}

func (b *fakeBox) StartAgent(ctx context.Context) (*agentclient.Client, error) {
	b.starts.Add(1)
	time.Sleep(b.delay)
	if err := b.fail.Load(); err != nil {
		return nil, *err
	}
	brokerEnd, agentEnd := net.Pipe()
	s := &agent.Server{Self: b.bin}
	go func() { _ = s.ServeConn(agentEnd) }()
	b.mu.Lock()
	b.conns = append(b.conns, agentEnd)
	b.mu.Unlock()
	b.t.Cleanup(func() { brokerEnd.Close(); agentEnd.Close() })
	return agentclient.New(ctx, brokerEnd)
}

func (b *fakeBox) Vanished(context.Context) string { return b.vanished }

func (b *fakeBox) Destroy(context.Context) error {
	b.destroys.Add(1)
	return b.destErr
}

// cut ends every agent connection from the agent's side.
func (b *fakeBox) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}

func (b *fakeBox) failWith(err error) { b.fail.Store(&err) }

func newWorkspace(t *testing.T, cfg remote.Config) (*remote.Workspace, *fakeBox) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the agent runs on Linux only")
	}
	box := &fakeBox{t: t, bin: testutil.AgentBinary(t)}
	cfg.Op, cfg.ID, cfg.Where = "fake", "w1", "in the fake box"
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	cfg.Exec = execconf.New()
	return remote.New(cfg, box), box
}

func TestConcurrentCallersShareOneStart(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{})
	box.delay = 100 * time.Millisecond
	var wg sync.WaitGroup
	clients := make([]*agentclient.Client, 8)
	for i := range clients {
		wg.Go(func() {
			c, err := w.Agent(t.Context())
			if err != nil {
				t.Error(err)
			}
			clients[i] = c
		})
	}
	wg.Wait()
	if n := box.starts.Load(); n != 1 {
		t.Fatalf("%d starts for 8 concurrent callers, want 1", n)
	}
	for _, c := range clients[1:] {
		if c != clients[0] {
			t.Fatal("callers got different connections")
		}
	}
	if got := w.Transport(); got != (opsapi.Transport{Agent: true}) {
		t.Errorf("Transport with a live agent: %+v", got)
	}
}

func TestFailedStartAnswersUnavailableUntilTheBackOffEnds(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{AgentRetry: 300 * time.Millisecond})
	box.failWith(errors.New("exec format error"))
	ctx := t.Context()
	if _, err := w.Stat(ctx, "."); !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "exec format error") {
		t.Fatalf("Stat with an agent that cannot start: %v, want unavailable naming the cause", err)
	}
	box.fail.Store(nil) // it could start now, but the back-off holds
	if _, err := w.Exec(ctx, opsapi.ExecRequest{Command: "true"}); !errors.Is(err, opsapi.ErrUnavailable) || !strings.Contains(err.Error(), "next try at") {
		t.Fatalf("Exec during the back-off: %v, want unavailable until the next try", err)
	}
	if n := box.starts.Load(); n != 1 {
		t.Fatalf("%d starts during the back-off, want 1", n)
	}
	if tr := w.Transport(); !tr.Agent || !strings.Contains(tr.Detail, "could not be started") {
		t.Errorf("Transport during the back-off: %+v", tr)
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := w.Stat(ctx, "."); err != nil {
		t.Fatalf("Stat after the back-off: %v", err)
	}
	if n := box.starts.Load(); n != 2 {
		t.Fatalf("%d starts, want 2", n)
	}
}

func TestWithoutBackOffEveryCallTriesAgain(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{})
	box.failWith(errors.New("no such file"))
	for range 2 {
		if _, err := w.Agent(t.Context()); !errors.Is(err, opsapi.ErrUnavailable) {
			t.Fatalf("Agent: %v, want unavailable", err)
		}
	}
	if n := box.starts.Load(); n != 2 {
		t.Fatalf("%d starts for 2 calls, want 2", n)
	}
}

func TestLostConnectionRestartsTheAgent(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{})
	ctx := t.Context()
	if err := w.WriteFile(ctx, "f", strings.NewReader("before")); err != nil {
		t.Fatal(err)
	}
	first, _ := w.Agent(ctx)
	box.cut()
	select {
	case <-first.Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not see its connection end")
	}
	if tr := w.Transport(); !tr.Agent || tr.Detail != "the agent starts at the next call" {
		t.Errorf("Transport after the connection ended: %+v", tr)
	}
	// A read on the lost connection is retried once on a new one.
	f, err := w.Open(ctx, "f")
	if err != nil {
		t.Fatalf("Open after the agent's connection was lost: %v", err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "before" {
		t.Fatalf("read %q", data)
	}
	if n, r := box.starts.Load(), w.Restarts(); n != 2 || r != 1 {
		t.Fatalf("starts %d, restarts %d; want 2 and 1", n, r)
	}
}

func TestVanishedBoxIsGone(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{})
	box.failWith(errors.New("pod not found"))
	box.vanished = "its pod was deleted"
	_, err := w.ReadDir(t.Context(), ".")
	if !errors.Is(err, opsapi.ErrNotExist) || !strings.Contains(err.Error(), "its pod was deleted") {
		t.Fatalf("ReadDir in a vanished box: %v, want not_exist with the reason", err)
	}
	if w.Gone() != "its pod was deleted" {
		t.Fatalf("Gone = %q", w.Gone())
	}
	if _, err := w.Exec(t.Context(), opsapi.ExecRequest{Command: "true"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("Exec in a vanished box: %v", err)
	}
	if n := box.starts.Load(); n != 1 {
		t.Fatalf("%d starts, want 1: a gone box is not started again", n)
	}
}

func TestDestroy(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{})
	ctx := t.Context()
	box.destErr = errors.New("api down")
	if err := w.Destroy(ctx); err == nil || w.Destroyed() {
		t.Fatalf("Destroy with a failing transport: %v, destroyed %v", err, w.Destroyed())
	}
	box.destErr = nil
	if _, err := w.Agent(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.DestroyWith(ctx, "expired"); err != nil {
		t.Fatal(err)
	}
	if err := w.Destroy(ctx); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if n := box.destroys.Load(); n != 2 {
		t.Fatalf("%d transport destroys, want 2 (one failed, one done)", n)
	}
	if w.AgentLive() {
		t.Error("the agent connection outlived Destroy")
	}
	_, err := w.Stat(ctx, ".")
	if !errors.Is(err, opsapi.ErrNotExist) || !strings.Contains(err.Error(), "workspace expired") {
		t.Fatalf("Stat after Destroy: %v", err)
	}
	if _, err := w.Agent(ctx); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("Agent after Destroy: %v", err)
	}
	if w.IdleFor() != 0 {
		t.Error("a destroyed workspace reports idle time")
	}
}

func TestExecWorkingDirectory(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{MemoryLimit: func(context.Context) int64 { return 1 << 30 }})
	ctx := t.Context()
	root := w.Root()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self", filepath.Join(root, "p")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(ctx, opsapi.ExecRequest{Command: "true", Cwd: "/proc/1"}); !errors.Is(err, opsapi.ErrPermission) {
		t.Fatalf("Exec in /proc: %v, want permission", err)
	}
	if n := box.starts.Load(); n != 0 {
		t.Fatalf("a refused /proc cwd started the agent (%d)", n)
	}
	if _, err := w.Exec(ctx, opsapi.ExecRequest{Command: "true", Cwd: "p"}); !errors.Is(err, opsapi.ErrPermission) {
		t.Fatalf("Exec in a link to /proc: %v, want permission", err)
	}
	if _, err := w.Exec(ctx, opsapi.ExecRequest{Command: "true", Cwd: "missing"}); !errors.Is(err, opsapi.ErrNotExist) {
		t.Fatalf("Exec in a missing directory: %v, want not_exist", err)
	}
	if _, err := w.Exec(ctx, opsapi.ExecRequest{Command: "true", Env: []string{"WSBROKER_CALL=x"}}); !errors.Is(err, opsapi.ErrInvalid) {
		t.Fatalf("Exec setting a reserved variable: %v, want invalid", err)
	}
	var out strings.Builder
	res, err := w.Exec(ctx, opsapi.ExecRequest{Command: "pwd; echo $GREETING", Cwd: "sub", Env: []string{"GREETING=hi"}, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "sub") + "\nhi\n"; out.String() != want || res.ExitCode != 0 || res.OOMKilled {
		t.Fatalf("Exec: %+v %q, want output %q", res, out.String(), want)
	}
}

// fakeFallback serves a box without an agent: its files from this
// process's SFTP server, its commands and searches recorded.
type fakeFallback struct {
	execs, searches atomic.Int64
	client          *sftp.Client
}

func (f *fakeFallback) SFTP(context.Context, *sftp.Client) (*sftp.Client, error) {
	return f.client, nil
}

func (f *fakeFallback) Identity(context.Context) (sftpops.Identity, error) {
	return sftpops.Identity{UID: os.Getuid(), GIDs: []int{os.Getgid()}}, nil
}

func (f *fakeFallback) Exec(_ context.Context, req opsapi.ExecRequest, cwd string) (opsapi.ExecResult, error) {
	f.execs.Add(1)
	_, err := io.WriteString(req.Output, cwd+":"+req.Command)
	return opsapi.ExecResult{}, err
}

func (f *fakeFallback) StartSearch(context.Context, []string, io.Writer) (rgjson.Process, error) {
	f.searches.Add(1)
	return nil, opsapi.E("fake", "", opsapi.ErrUnavailable, errors.New("no search here"))
}

func newFallback(t *testing.T) *fakeFallback {
	t.Helper()
	brokerEnd, serverEnd := net.Pipe()
	go func() { _ = sftp.NewRequestServer(serverEnd, sftp.InMemHandler()).Serve() }()
	sc, err := sftp.NewClientPipe(brokerEnd, brokerEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close(); serverEnd.Close() })
	return &fakeFallback{client: sc}
}

func TestNoAgentTakesTheFallback(t *testing.T) {
	fb := newFallback(t)
	w, box := newWorkspace(t, remote.Config{Root: "/", NoAgent: "no agent binary is injected", Fallback: fb})
	ctx := t.Context()
	if tr := w.Transport(); tr.Agent || tr.Detail != "no agent binary is injected" {
		t.Fatalf("Transport without an agent: %+v", tr)
	}
	if err := w.WriteFile(ctx, "/f", strings.NewReader("x")); err != nil {
		t.Fatalf("WriteFile over the fallback's SFTP: %v", err)
	}
	if fi, err := w.Stat(ctx, "/f"); err != nil || fi.Size != 1 {
		t.Fatalf("Stat: %+v %v", fi, err)
	}
	var out strings.Builder
	if _, err := w.Exec(ctx, opsapi.ExecRequest{Command: "true", Output: &out}); err != nil || out.String() != "/:true" {
		t.Fatalf("Exec: %q %v, want the fallback's", out.String(), err)
	}
	if _, err := w.Search(ctx, opsapi.SearchRequest{Pattern: "x", Path: "/"}); !strings.Contains(fmt.Sprint(err), "no search here") {
		t.Fatalf("Search: %v, want the fallback's error", err)
	}
	if box.starts.Load() != 0 || fb.execs.Load() != 1 || fb.searches.Load() != 1 {
		t.Fatalf("starts %d, fallback execs %d and searches %d", box.starts.Load(), fb.execs.Load(), fb.searches.Load())
	}
}

func TestStartAgentSaysNoAgent(t *testing.T) {
	fb := newFallback(t)
	w, box := newWorkspace(t, remote.Config{Root: "/", Fallback: fb})
	box.failWith(remote.NoAgent("the agent's session ended"))
	var out strings.Builder
	if _, err := w.Exec(t.Context(), opsapi.ExecRequest{Command: "true", Output: &out}); err != nil || out.String() != "/:true" {
		t.Fatalf("Exec: %q %v, want the fallback's", out.String(), err)
	}
	if tr := w.Transport(); tr.Agent || !strings.Contains(tr.Detail, "the agent's session ended") {
		t.Fatalf("Transport: %+v", tr)
	}
	box.fail.Store(nil)
	if _, err := w.Exec(t.Context(), opsapi.ExecRequest{Command: "true", Output: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if fb.execs.Load() != 1 || !w.AgentLive() {
		t.Fatalf("fallback execs %d, agent live %v: the agent, once there, serves", fb.execs.Load(), w.AgentLive())
	}
}

func TestNoAgentWithoutFallbackIsUnavailable(t *testing.T) {
	w, box := newWorkspace(t, remote.Config{})
	box.failWith(remote.NoAgent("none"))
	if _, err := w.Stat(t.Context(), "."); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("Stat: %v, want unavailable", err)
	}
	if _, err := w.Exec(t.Context(), opsapi.ExecRequest{Command: "true"}); !errors.Is(err, opsapi.ErrUnavailable) {
		t.Fatalf("Exec: %v, want unavailable", err)
	}
}

func TestTakeAgent(t *testing.T) {
	member, box := newWorkspace(t, remote.Config{})
	if _, err := member.Agent(t.Context()); err != nil {
		t.Fatal(err)
	}
	w := remote.New(remote.Config{Op: "fake", ID: "w2", Root: member.Root()}, box)
	w.TakeAgent(member)
	if !w.AgentLive() || member.AgentLive() {
		t.Fatal("the connection did not move")
	}
	if _, err := w.Stat(t.Context(), "."); err != nil || box.starts.Load() != 1 {
		t.Fatalf("Stat on the taken agent: %v, %d starts", err, box.starts.Load())
	}
}

func TestEndedAgentCountsOneRestart(t *testing.T) {
	fb := newFallback(t)
	w, box := newWorkspace(t, remote.Config{Fallback: fb})
	first, err := w.Agent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	box.cut()
	<-first.Closed()
	box.failWith(remote.NoAgent("the agent's session ended"))
	for range 3 {
		if _, err := w.Exec(t.Context(), opsapi.ExecRequest{Command: "true", Output: io.Discard}); err != nil {
			t.Fatal(err)
		}
	}
	if r := w.Restarts(); r != 1 || fb.execs.Load() != 3 {
		t.Fatalf("restarts %d, fallback execs %d: want 1 and 3", r, fb.execs.Load())
	}
}
