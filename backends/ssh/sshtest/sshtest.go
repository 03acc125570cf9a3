package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsbroker/wsbroker/internal/testutil"
)

// User is the dedicated test account.
const User = "wsbtest"

// SshdPath is the OpenSSH server binary the tests run.
const SshdPath = "/usr/sbin/sshd"

// Server is one running sshd.
type Server struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// User is the account to log in as (User).
	User string
	// Home is the account's home directory.
	Home string
	// IdentityFile is the user's private key (OpenSSH format).
	IdentityFile string
	// KnownHosts lists the server's host key for Addr.
	KnownHosts string
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey

	t   testing.TB
	dir string
	cfg string

	mu  sync.Mutex
	cmd *exec.Cmd
	log *lockedWriter
}

// Start creates the test account if needed, generates keys, starts sshd
// and registers its stop with t.Cleanup. It skips (fails under CI) without
// root or sshd.
func Start(t testing.TB) *Server {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, SshdPath)
	home, err := ensureUser()
	if err != nil {
		t.Fatalf("sshtest: test account: %v", err)
	}
	// Not t.TempDir: sshd reads authorized_keys as the test user, who
	// must be able to reach it.
	dir, err := os.MkdirTemp("", "wsb-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{User: User, Home: home, t: t, dir: dir}
	if err := s.writeFiles(); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	if err := s.start(); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

// ensureUser creates the test account (idempotently) with /bin/bash and
// an empty home, and returns its home directory.
func ensureUser() (string, error) {
	if u, err := user.Lookup(User); err == nil {
		return u.HomeDir, unlock()
	}
	skel, err := os.MkdirTemp("", "wsb-skel-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(skel)
	// An empty skeleton: no .bashrc or .profile that would run per session.
	out, err := exec.Command("useradd", "--create-home", "--skel", skel, "--shell", "/bin/bash", User).CombinedOutput()
	if err != nil {
		if u, lerr := user.Lookup(User); lerr == nil { // created concurrently
			return u.HomeDir, nil
		}
		return "", fmt.Errorf("useradd: %v: %s", err, out)
	}
	u, err := user.Lookup(User)
	if err != nil {
		return "", err
	}
	return u.HomeDir, unlock()
}

// unlock gives the account the password "*" (no password can match)
// instead of useradd's "!": without PAM, sshd refuses key logins to a
// locked account.
func unlock() error {
	b, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "\n"+User+":!") && !strings.HasPrefix(string(b), User+":!") {
		return nil
	}
	if out, err := exec.Command("usermod", "-p", "*", User).CombinedOutput(); err != nil {
		return fmt.Errorf("usermod: %v: %s", err, out)
	}
	return nil
}

func (s *Server) writeFiles() error {
	hostPub, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	userPub, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	hostKey, err := ssh.NewPublicKey(hostPub)
	if err != nil {
		return err
	}
	userKey, err := ssh.NewPublicKey(userPub)
	if err != nil {
		return err
	}
	s.HostKey = hostKey
	write := func(name string, data []byte, mode os.FileMode) (string, error) {
		p := filepath.Join(s.dir, name)
		return p, os.WriteFile(p, data, mode)
	}
	hostFile, err := writeKey(s.dir, "host_ed25519", hostPriv)
	if err != nil {
		return err
	}
	if s.IdentityFile, err = writeKey(s.dir, "id_ed25519", userPriv); err != nil {
		return err
	}
	authKeys, err := write("authorized_keys", ssh.MarshalAuthorizedKey(userKey), 0o644)
	if err != nil {
		return err
	}

	port, err := freePort()
	if err != nil {
		return err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if s.KnownHosts, err = write("known_hosts", []byte(knownhosts.Line([]string{s.Addr}, hostKey)+"\n"), 0o644); err != nil {
		return err
	}
	cfg := strings.Join([]string{
		"Port " + strconv.Itoa(port),
		"ListenAddress 127.0.0.1",
		"HostKey " + hostFile,
		"AuthorizedKeysFile " + authKeys,
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no",
		"PermitRootLogin no",
		"AllowUsers " + User,
		"UseDNS no",
		"PrintMotd no",
		"PidFile " + filepath.Join(s.dir, "sshd.pid"),
		"Subsystem sftp internal-sftp",
		"MaxStartups 100",
		"LogLevel ERROR",
		"",
	}, "\n")
	s.cfg, err = write("sshd_config", []byte(cfg), 0o644)
	return err
}

// writeKey stores an ed25519 private key in OpenSSH format, mode 0600.
func writeKey(dir, name string, key ed25519.PrivateKey) (string, error) {
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, pem.EncodeToMemory(block), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs sshd and waits until it accepts connections.
func (s *Server) start() error {
	// sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return err
	}
	log := &lockedWriter{}
	cmd := exec.Command(SshdPath, "-D", "-e", "-f", s.cfg)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // sshd killed by the test is the normal end
	s.mu.Lock()
	s.cmd, s.log = cmd, log
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("sshd exited at start: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("sshd not listening on %s after 10s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill ends sshd abruptly: SIGKILL to the listener and to every sshd
// process serving a connection (its descendants named sshd). Processes
// the account started keep running, as after a dropped network. Kill
// returns once the port refuses connections.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	pids := append([]int{cmd.Process.Pid}, sshdDescendants(cmd.Process.Pid)...)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL) // it may have exited already
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts sshd again after Kill, on the same port with the same
// keys.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("sshtest: restart: %v", err)
	}
}

func (s *Server) stop() {
	s.Kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t.Failed() && s.log != nil {
		if l := s.log.String(); l != "" {
			s.t.Logf("sshd log:\n%s", l)
		}
	}
}

// sshdDescendants lists the descendants of pid whose command is sshd.
func sshdDescendants(pid int) []int {
	children := map[int][]int{}
	comm := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		st := string(b)
		open, close := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(st[close+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
		comm[p] = st[open+1 : close]
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if comm[c] == "sshd" {
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// ClientConfig returns an x/crypto/ssh configuration that logs in with the
// test key and verifies the host key against KnownHosts, for tests that
// measure or probe the server directly.
func (s *Server) ClientConfig() (*ssh.ClientConfig, error) {
	return clientConfig(s.User, s.IdentityFile, s.KnownHosts)
}

// clientConfig logs in as user with the key in identityFile and verifies
// host keys against the known_hosts file knownHosts.
func clientConfig(user, identityFile, knownHosts string) (*ssh.ClientConfig, error) {
	b, err := os.ReadFile(identityFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, err
	}
	cb, err := knownhosts.New(knownHosts)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User:              user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   cb,
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           10 * time.Second,
	}, nil
}

// WorkDir creates a fresh directory owned by the test account under its
// home and removes it when the test ends; its path is returned.
func (s *Server) WorkDir(t testing.TB) string {
	t.Helper()
	u, err := user.Lookup(s.User)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base := filepath.Join(s.Home, "wsb-tests")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, uid, gid); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "w-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Log(err)
		}
	})
	return dir
}

// lockedWriter keeps the first MiB of sshd's log.
type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() < 1<<20 {
		l.w.Write(p)
	}
	return len(p), nil
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
