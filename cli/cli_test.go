package cli

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/broker"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// startBroker serves the real broker and local backend on loopback.
func startBroker(t *testing.T, token string) string {
	t.Helper()
	return startBrokerConfig(t, broker.Config{Tokens: []string{token}})
}

// startBrokerConfig is startBroker with the broker's whole config.
func startBrokerConfig(t *testing.T, cfg broker.Config) string {
	t.Helper()
	lb, err := local.New(local.Config{StateDir: t.TempDir()}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := broker.New(cfg, map[string]opsapi.Backend{"local": lb}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
		_ = lb.Close()
	})
	return ts.URL
}

// run runs the CLI in-process with env and returns stdout, stderr and the
// exit status.
func run(env map[string]string, stdin string, args ...string) (string, string, int) {
	var out, errb strings.Builder
	c := &CLI{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: envMap(env)}
	code := c.Run(context.Background(), args)
	return out.String(), errb.String(), code
}

func TestClientCommands(t *testing.T) {
	url := startBroker(t, "s3cret")
	env := map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}

	out, errs, code := run(env, "", "ws", "create")
	id := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^ws_[a-z2-7]{26}$`).MatchString(id) {
		t.Fatalf("ws create: %d %q %q", code, out, errs)
	}
	if out, _, code := run(env, "", "ws", "ls", "--json"); code != 0 || !strings.Contains(out, `"id": "`+id+`"`) {
		t.Fatalf("ws ls --json: %d %q", code, out)
	}
	if _, errs, code := run(env, "", "tool", id, "write", `{"path":"a.txt","content":"alpha\n"}`); code != 0 {
		t.Fatalf("tool write: %d %q", code, errs)
	}
	if out, _, code := run(env, `{"path":"a.txt"}`, "tool", id, "read", "-"); code != 0 || out != "alpha\n" {
		t.Fatalf("tool read: %d %q", code, out)
	}
	if out, _, code := run(env, "", "tool", "--json", id, "ls", "{}"); code != 0 || !strings.Contains(out, `"isError": false`) {
		t.Fatalf("tool --json: %d %q", code, out)
	}
	if out, errs, code := run(env, "", "tool", id, "read", `{"path":"nope"}`); code != 1 || out != "" || errs == "" {
		t.Fatalf("tool error result: %d %q %q", code, out, errs)
	}
	if out, _, code := run(env, "", "exec", id, "--", "sh", "-c", "cat a.txt; exit 4"); code != 4 || out != "alpha\n" {
		t.Fatalf("exec: %d %q", code, out)
	}
	if _, _, code := run(env, "", "ws", "rm", id); code != 0 {
		t.Fatalf("ws rm: %d", code)
	}
	if _, errs, code := run(env, "", "ws", "rm", id); code != 1 || !strings.Contains(errs, id) {
		t.Fatalf("second ws rm: %d %q", code, errs)
	}
}

func TestTokenProblemsAreExplained(t *testing.T) {
	url := startBroker(t, "s3cret")
	home := t.TempDir()

	// No token anywhere: say how to give one.
	_, errs, code := run(map[string]string{"BROKER_URL": url, "HOME": home}, "", "ws", "ls")
	if code != 1 || !strings.Contains(errs, "no token") {
		t.Fatalf("no token: %d %q", code, errs)
	}
	// The token file in the default state directory is the default token.
	state := filepath.Join(home, ".local", "state", "wsbroker")
	if _, _, err := ensureToken(filepath.Join(state, "token")); err != nil {
		t.Fatal(err)
	}
	_, errs, code = run(map[string]string{"BROKER_URL": url, "HOME": home}, "", "ws", "ls")
	if code != 1 || !strings.Contains(errs, "check BROKER_TOKEN") {
		t.Fatalf("wrong token from the default file: %d %q", code, errs)
	}
	_, errs, code = run(map[string]string{"BROKER_URL": url, "HOME": home, "BROKER_TOKEN": "s3cret"}, "", "ws", "ls")
	if code != 0 {
		t.Fatalf("BROKER_TOKEN wins over the file: %d %q", code, errs)
	}
}

// TestRefusedConnectionSaysHowToStartTheBroker: a client command whose
// broker does not listen names the URL it tried and how to start one.
func TestRefusedConnectionSaysHowToStartTheBroker(t *testing.T) {
	url := "http://" + freeAddr(t)
	_, errs, code := run(map[string]string{"BROKER_URL": url, "BROKER_TOKEN": "s3cret", "HOME": t.TempDir()}, "", "ws", "ls")
	if code != 1 || !strings.Contains(errs, "no broker answers at "+url+" (connection refused)") || !strings.Contains(errs, "broker serve") {
		t.Fatalf("ws ls with nothing listening: %d %q", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	cases := [][]string{
		{},
		{"nope"},
		{"ws"},
		{"ws", "frobnicate"},
		{"tool", "ws_x"},
		{"tool", "ws_x", "read", "{not json"},
		{"exec", "ws_x"},
		{"serve", "extra"},
		{"ws", "create", "--options", "{"},
	}
	for _, args := range cases {
		if _, _, code := run(env, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if out, _, code := run(env, "", "help"); code != 0 || !strings.Contains(out, "broker <command>") {
		t.Errorf("help: %d %q", code, out)
	}
	if _, _, code := run(env, "", "exec", "-h"); code != 0 {
		t.Errorf("exec -h: %d", code)
	}
	if out, _, code := run(env, "", "version"); code != 0 || !strings.HasPrefix(out, "broker ") {
		t.Errorf("version: %d %q", code, out)
	}
}
