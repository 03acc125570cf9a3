package sshtest_test

import (
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/backends/ssh/sshtest"
)

func TestStartLoginRun(t *testing.T) {
	s := sshtest.Start(t)
	cfg, err := s.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", s.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CombinedOutput("id -un; echo $SHELL")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != sshtest.User+"\n/bin/bash\n" {
		t.Fatalf("output %q", out)
	}
}

// BenchmarkRawSessionTrue is the raw cost of one SSH session running
// `true` on an open connection: the reference for the backend's Exec.
func BenchmarkRawSessionTrue(b *testing.B) {
	s := sshtest.Start(b)
	cfg, err := s.ClientConfig()
	if err != nil {
		b.Fatal(err)
	}
	c, err := ssh.Dial("tcp", s.Addr, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		sess, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := sess.Run("true"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStartContainerLoginRun(t *testing.T) {
	c := sshtest.StartContainer(t)
	if !strings.HasPrefix(c.Addr, "127.0.0.1:") {
		t.Fatalf("Addr %q is not on loopback", c.Addr)
	}
	cfg, err := c.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ssh.Dial("tcp", c.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sess, err := cl.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CombinedOutput("id -un; echo $HOME")
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != sshtest.User+"\n"+c.Home+"\n" {
		t.Fatalf("output %q", out)
	}
	// Each container serves the host key injected for it, not one baked
	// into the image: another container's key does not verify this one.
	other := sshtest.StartContainer(t)
	cfg.HostKeyCallback = ssh.FixedHostKey(other.HostKey)
	if cl, err := ssh.Dial("tcp", c.Addr, cfg); err == nil {
		cl.Close()
		t.Fatal("login accepted with another container's host key")
	}
}
