package adversarial_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/local"
	"github.com/wsbroker/wsbroker/backends/local/sandbox"
	"github.com/wsbroker/wsbroker/internal/testutil"
	"github.com/wsbroker/wsbroker/opsapi"
)

// sandboxRun runs command in ws and returns its combined output.
func sandboxRun(t *testing.T, ws opsapi.Workspace, command string) string {
	t.Helper()
	var out bytes.Buffer
	_, err := ws.(opsapi.BashOperations).Exec(t.Context(), opsapi.ExecRequest{Command: command, Output: &out, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return out.String()
}

// TestLocalSandbox: a command on the local backend (root broker) tries
// to reach what the sandbox keeps from it. Every attempt prints LEAK
// only if it succeeds; the canaries must be unchanged.
func TestLocalSandbox(t *testing.T) {
	testutil.RequireRoot(t)
	state := t.TempDir()
	b, err := local.New(local.Config{StateDir: state, Sandbox: local.SandboxConfig{Mode: "on"}}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	newWS := func(id string) opsapi.Workspace {
		ws, err := b.Create(context.Background(), opsapi.WorkspaceSpec{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		destroyAtCleanup(t, ws)
		return ws
	}
	ws, other := newWS("attacker"), newWS("victim")
	if err := other.(opsapi.WriteOperations).WriteFile(t.Context(), "secret", strings.NewReader("victim's secret")); err != nil {
		t.Fatal(err)
	}
	// The broker's secrets: a token file in its state directory, a
	// config file outside /tmp (/tmp is the workspace's own in the
	// sandbox), and a world-writable directory that only Landlock keeps
	// the command out of.
	token := filepath.Join(state, "token")
	mustWrite(t, token, "wsb_secret_token", 0o600)
	outside, err := os.MkdirTemp("/var/tmp", "wsb-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	config := filepath.Join(outside, "config.yaml")
	mustWrite(t, config, "tenants: {}\n", 0o644)
	open := filepath.Join(outside, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	openCanary := filepath.Join(open, "canary")
	mustWrite(t, openCanary, "canary", 0o666)
	if err := os.Chmod(openCanary, 0o666); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	defer signal.Stop(terms)
	self := os.Getpid()
	port := ln.Addr().(*net.TCPAddr).Port

	cases := []struct{ name, command string }{
		{"read /etc/shadow", "cat /etc/shadow && echo LEAK"},
		{"list the TLS private keys", "ls /etc/ssl/private && echo LEAK"},
		{"read the broker's token", "cat " + token + " && echo LEAK"},
		{"list the state directory", "ls -A " + state + " | grep -v workspaces && echo LEAK"},
		{"read another workspace's file", "cat " + filepath.Join(other.Root(), "secret") + " && echo LEAK"},
		{"read the other workspace's directory", "ls " + other.Root() + " && echo LEAK"},
		{"write outside the root where permissions allow", "echo PWNED > " + openCanary + " && echo LEAK"},
		{"create outside the root where permissions allow", "echo PWNED > " + filepath.Join(open, "new") + " && echo LEAK"},
		{"edit the broker's config", "echo 'admin: true' >> " + config + " && echo LEAK"},
		{"signal the broker", fmt.Sprintf("kill -TERM %d && echo LEAK", self)},
		{"ptrace the broker", fmt.Sprintf("strace -p %d -e trace=none -o /dev/null & sleep 1; kill -0 $! 2>/dev/null && echo LEAK", self)},
		{"connect to a listener on the host's loopback", fmt.Sprintf("echo hi > /dev/tcp/127.0.0.1/%d && echo LEAK", port)},
		{"mount", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo LEAK"},
		{"unshare a user namespace", "unshare -U true && echo LEAK"},
		{"unshare a network namespace", "unshare -n true && echo LEAK"},
		{"leave the cgroup", `for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do [ -e "$f" ] && echo $$ > "$f" && echo "LEAK $f"; done; true`},
		{"become root through setuid", "su -c id root </dev/null && echo LEAK; sudo -n id && echo LEAK; true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.name, "where permissions allow") && sandbox.LandlockABI() == 0 {
				testutil.SkipOrFail(t, "only Landlock holds this, and the kernel has none")
			}
			if out := sandboxRun(t, ws, c.command); strings.Contains(out, "LEAK") {
				t.Errorf("%s succeeded: %q", c.command, out)
			}
		})
	}
	t.Run("confinement holds in the command", func(t *testing.T) {
		out := sandboxRun(t, ws, "id -u; id -G; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status")
		f := strings.Fields(out)
		if len(f) != 6 || f[0] == "0" || f[0] != f[1] || f[3] != "1" || f[5] != "2" {
			t.Errorf("uid, groups, no_new_privs, seccomp: %q", out)
		}
	})
	t.Run("in its command's own cgroup from the start", func(t *testing.T) {
		// Entered through descriptors as the sandbox's uid (no
		// CLONE_INTO_CGROUP under the filter): every hierarchy in use.
		const check = "grep -E ':(pids|memory|freezer|cpu)?:' /proc/self/cgroup | grep -v '/cmd-' | grep -Ev '^[0-9]+::?/$' || echo IN"
		if out := sandboxRun(t, ws, check); out != "IN\n" {
			t.Errorf("outside its command group in: %q", out)
		}
		// A BASH_ variable makes bash's own entry unsafe: /bin/sh enters.
		var out bytes.Buffer
		_, err := ws.(opsapi.BashOperations).Exec(t.Context(), opsapi.ExecRequest{Command: check + "; echo $BASH_X", Env: []string{"BASH_X=kept"}, Output: &out, Timeout: 20 * time.Second})
		if err != nil || out.String() != "IN\nkept\n" {
			t.Errorf("entered by /bin/sh: %q, %v", out.String(), err)
		}
	})
	t.Run("loopback inside works", func(t *testing.T) {
		out := sandboxRun(t, ws, `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(Listen=>1,LocalAddr=>"127.0.0.1:0") or die "$!"; print "up\n"'`)
		if out != "up\n" {
			t.Errorf("listening on the sandbox's loopback: %q", out)
		}
	})
	t.Run("tmp is the workspace's own", func(t *testing.T) {
		sandboxRun(t, ws, "echo mine > /tmp/f")
		if out := sandboxRun(t, other, "cat /tmp/f 2>/dev/null || echo absent"); out != "absent\n" {
			t.Errorf("another workspace sees /tmp/f: %q", out)
		}
		if out := sandboxRun(t, ws, "cat /tmp/f"); out != "mine\n" {
			t.Errorf("/tmp does not last between a workspace's commands: %q", out)
		}
	})
	select {
	case <-accepted:
		t.Error("the listener outside the sandbox accepted a connection")
	case <-terms:
		t.Error("the broker got SIGTERM")
	default:
	}
	for p, want := range map[string]string{token: "wsb_secret_token", config: "tenants: {}\n", openCanary: "canary"} {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("%s changed: %q, %v", p, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(open, "new")); err == nil {
		t.Error("a file was created outside the root")
	}
}

func mustWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestLocalSandboxUsualWork: what agents do every day still works in the
// sandbox: git, a compiler, an interpreter, and npm installing a package
// from a local path (no network: the sandbox has only loopback).
func TestLocalSandboxUsualWork(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "git", "cc", "node", "npm")
	b, err := local.New(local.Config{StateDir: t.TempDir(), Sandbox: local.SandboxConfig{Mode: "on"}}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ws, err := b.Create(t.Context(), opsapi.WorkspaceSpec{ID: "work"})
	if err != nil {
		t.Fatal(err)
	}
	destroyAtCleanup(t, ws)
	cases := []struct{ name, command, want string }{
		{"git", `git init -q r && cd r && git config user.email a@b && git config user.name a &&
			echo hi > f && git add f && git commit -qm first && git log --format=%s`, "first\n"},
		{"a C compiler", `printf '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n' > m.c && cc -o m m.c && ./m`, "compiled\n"},
		{"an interpreter", `node -e 'console.log(6*7)'`, "42\n"},
		{"npm from a local path", `mkdir -p lib app && cd lib && printf '{"name":"lib","version":"1.0.0","main":"i.js"}' > package.json &&
			echo 'module.exports = "from lib"' > i.js && cd ../app && echo '{"name":"app","version":"1.0.0"}' > package.json &&
			npm install --offline --no-audit --no-fund ../lib >/dev/null 2>&1; node -e 'console.log(require("lib"))'`, "from lib\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if out := sandboxRun(t, ws, c.command); !strings.HasSuffix(out, c.want) {
				t.Errorf("%s: got %q, want it to end with %q", c.name, out, c.want)
			}
		})
	}
}
