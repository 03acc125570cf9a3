package cli

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// TestServePrintsTheNextStep starts serve on a free port with its own
// state directory and runs the command it prints, exactly as printed.
func TestServePrintsTheNextStep(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	stdout := &testutil.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		c := &CLI{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: &testutil.LockedBuffer{}, Getenv: envMap(map[string]string{"HOME": home})}
		done <- c.Run(ctx, []string{"serve", "--listen", freeAddr(t), "--state-dir", state})
	}()
	t.Cleanup(func() { cancel(); <-done })

	next := regexp.MustCompile(`(?m)^Next, .*\n  (.*) broker ws create\n`)
	deadline := time.Now().Add(15 * time.Second)
	for !next.MatchString(stdout.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("serve never printed the next step; stdout:\n%s", stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	env := map[string]string{"HOME": home}
	for _, kv := range strings.Fields(next.FindStringSubmatch(stdout.String())[1]) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["BROKER_TOKEN_FILE"] != filepath.Join(state, "token") || !strings.HasPrefix(env["BROKER_URL"], "http://127.0.0.1:") {
		t.Fatalf("next step environment %v", env)
	}
	if out, errs, code := run(env, "", "ws", "create"); code != 0 || !strings.HasPrefix(out, "ws_") {
		t.Fatalf("the printed command failed: %d %q %q", code, out, errs)
	}
	if !strings.Contains(stdout.String(), "curl -H \"Authorization: Bearer $(cat "+filepath.Join(state, "token")+")\"") {
		t.Fatalf("no curl line:\n%s", stdout.String())
	}
}

// TestServeMakesTheTokenOnlyOnceListening: a serve that cannot bind its
// address stops with the reason and leaves no token behind, so the next
// start, the one that works, is the one that creates and shows it.
func TestServeMakesTheTokenOnlyOnceListening(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	env := map[string]string{"HOME": home}
	_, errs, code := run(env, "", "serve", "--listen", addr, "--state-dir", state)
	tokenFile := filepath.Join(state, "token")
	if _, statErr := os.Stat(tokenFile); code != 1 || !strings.Contains(errs, "address already in use") ||
		strings.Contains(errs, "API token") || !errors.Is(statErr, fs.ErrNotExist) {
		t.Fatalf("serve on a taken address: %d %q, token file: %v; want 1, the bind error, and no token", code, errs, statErr)
	}
	taken.Close()

	stdout, stderr := &testutil.LockedBuffer{}, &testutil.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		c := &CLI{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: envMap(env)}
		done <- c.Run(ctx, []string{"serve", "--listen", addr, "--state-dir", state})
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(stdout.String(), "Next, ") {
		if time.Now().After(deadline) {
			t.Fatalf("the second serve never started; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok, err := readToken(tokenFile)
	if err != nil || !strings.Contains(stderr.String(), "created a new API token in "+tokenFile+" (shown only this once):\n"+tok+"\n") {
		t.Fatalf("the start that listens shows no new token (%v); stderr:\n%s", err, stderr.String())
	}
}

func TestBrokerURLReachesAnUnspecifiedAddressOnLoopback(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8722": "http://127.0.0.1:8722",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		"[::]:9000":      "http://127.0.0.1:9000",
		"[::1]:9000":     "http://[::1]:9000",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := brokerURL(tcp, false); got != want {
			t.Errorf("brokerURL(%s) = %s, want %s", addr, got, want)
		}
	}
}
