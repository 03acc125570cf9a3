package sshtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// Image is the VM-like OpenSSH target built by images/sshd/build.sh.
const Image = "wsbroker/sshd:current"

// containerHome is the test account's home inside Image.
const containerHome = "/home/" + User

// readyLine is what sshd logs once it accepts connections (images/sshd
// README: the engine's proxy accepts on the host port before that).
const readyLine = "Server listening on 0.0.0.0 port 22."

// Container is an sshd in a container of its own, reached only through a
// port published on 127.0.0.1: a stand-in for a VM.
type Container struct {
	// ID is the container's id.
	ID string
	// Addr is "127.0.0.1:<published port>"; never the bridge address.
	Addr string
	// User is the account to log in as (User).
	User string
	// Home is the account's home inside the container.
	Home string
	// IdentityFile is the user's private key (OpenSSH format), on the
	// test host.
	IdentityFile string
	// KnownHosts lists the container's host key for Addr.
	KnownHosts string
	// HostKey is the container's public host key.
	HostKey ssh.PublicKey
}

// StartContainer runs Image detached with a fresh host key and user key
// injected, waits until sshd accepts logins through the loopback port,
// writes known_hosts for it, and removes the container when the test
// ends. dockerArgs are added to `docker run` (e.g. a pids limit). It
// skips (fails under CI) without docker or the image.
func StartContainer(t testing.TB, dockerArgs ...string) *Container {
	t.Helper()
	testutil.RequireImage(t, Image)
	dir := t.TempDir()
	hostPub, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	userPub, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewPublicKey(hostPub)
	if err != nil {
		t.Fatal(err)
	}
	userKey, err := ssh.NewPublicKey(userPub)
	if err != nil {
		t.Fatal(err)
	}
	hostFile, err := writeKey(dir, "host_ed25519", hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	hostPEM, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &Container{User: User, Home: containerHome, HostKey: hostKey}
	if c.IdentityFile, err = writeKey(dir, "id_ed25519", userPriv); err != nil {
		t.Fatal(err)
	}

	// The keys go in through the docker CLI's environment (`-e NAME`
	// without a value), so they do not show in the process list.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"run", "-d", "--rm",
		"-p", "127.0.0.1::22",
		"--label", "wsbroker.test=sshtest",
		"-e", "WSB_HOST_KEY", "-e", "WSB_AUTHORIZED_KEYS"}, dockerArgs...)
	run := exec.CommandContext(ctx, "docker", append(args, Image)...)
	run.Env = append(os.Environ(),
		"WSB_HOST_KEY="+string(hostPEM),
		"WSB_AUTHORIZED_KEYS="+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(userKey))))
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("sshtest: docker run %s: %v: %s", Image, err, strings.TrimSpace(stderr.String()))
	}
	c.ID = strings.TrimSpace(string(out))
	t.Cleanup(func() { c.remove(t) })

	if err := c.waitReady(ctx); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	if c.Addr, err = c.publishedAddr(ctx); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	c.KnownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(c.KnownHosts, []byte(knownhosts.Line([]string{c.Addr}, hostKey)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.waitLogin(ctx); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return c
}

// waitReady waits for sshd's listening line in the container's log.
func (c *Container) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, err := dockerCmd(ctx, "logs", c.ID)
		if err != nil {
			// With --rm a container whose sshd failed is already gone.
			return fmt.Errorf("container %.12s: %w", c.ID, err)
		}
		if strings.Contains(logs, readyLine) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %.12s: sshd not ready after 30s; log:\n%s", c.ID, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// publishedAddr reads the host side of port 22 and insists on loopback.
func (c *Container) publishedAddr(ctx context.Context) (string, error) {
	out, err := dockerCmd(ctx, "port", c.ID, "22/tcp")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(out) {
		host, port, err := net.SplitHostPort(strings.TrimSpace(line))
		if err == nil && host == "127.0.0.1" && port != "" {
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", fmt.Errorf("container %.12s: no 127.0.0.1 port for 22/tcp in %q", c.ID, out)
}

// waitLogin retries a full login until it works: the ready line is
// sshd's, the engine's proxy in front of it may still lag.
func (c *Container) waitLogin(ctx context.Context) error {
	cfg, err := c.ClientConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	deadline := time.Now().Add(10 * time.Second)
	for {
		cl, err := ssh.Dial("tcp", c.Addr, cfg)
		if err == nil {
			return cl.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("login to %s (container %.12s): %w", c.Addr, c.ID, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remove deletes the container, logging its sshd log when the test failed.
func (c *Container) remove(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if t.Failed() {
		if logs, err := dockerCmd(ctx, "logs", "--tail", "200", c.ID); err == nil {
			t.Logf("sshd container %.12s log:\n%s", c.ID, logs)
		}
	}
	if _, err := dockerCmd(ctx, "rm", "-f", c.ID); err != nil && !strings.Contains(err.Error(), "No such container") {
		t.Errorf("sshtest: removing container: %v", err)
	}
}

// ClientConfig returns an x/crypto/ssh configuration that logs in with the
// test key and verifies the host key against KnownHosts.
func (c *Container) ClientConfig() (*ssh.ClientConfig, error) {
	return clientConfig(c.User, c.IdentityFile, c.KnownHosts)
}

// NewRoot returns a fresh absolute path under the account's home in the
// container. Nothing is made there: the backend creates the directory
// (and removes it on Destroy); the container goes with the test anyway.
func (c *Container) NewRoot() string {
	b := make([]byte, 8)
	rand.Read(b)
	return path.Join(c.Home, "wsb-tests", "w-"+hex.EncodeToString(b))
}

// Exec runs a command inside the container as root (docker exec) and
// returns its combined output.
func (c *Container) Exec(ctx context.Context, args ...string) (string, error) {
	return dockerCmd(ctx, append([]string{"exec", c.ID}, args...)...)
}

// KillSessions SIGKILLs every process of the test account in the
// container: its sshd session processes, so every connection drops, and
// the commands they ran. The server keeps listening with the same port
// and key, so the next dial succeeds.
func (c *Container) KillSessions(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.Exec(ctx, "pkill", "-KILL", "-u", c.User)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 { // pkill: nothing matched
		return
	}
	if err != nil {
		t.Fatalf("sshtest: pkill in container: %v: %s", err, out)
	}
}

// dockerCmd runs the docker CLI and returns its output (stdout and stderr
// together, which `docker logs` needs: sshd logs to stderr); a failure's
// error carries that output.
func dockerCmd(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
