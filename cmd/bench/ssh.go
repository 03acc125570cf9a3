package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	sshbackend "github.com/wsbroker/wsbroker/backends/ssh"
	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
)

// The loopback sshd follows backends/ssh/sshtest's recipe (which needs a
// testing.TB, so it cannot be used from this binary): the wsbtest
// account, fresh ed25519 host and user keys, and an sshd on a free
// loopback port with internal-sftp.
const (
	sshdPath = "/usr/sbin/sshd"
	sshUser  = "wsbtest"
)

// sshd is a running loopback OpenSSH server.
type sshd struct {
	Addr, Home, Dir          string
	IdentityFile, KnownHosts string
	cmd                      *exec.Cmd
	exited                   chan struct{}
}

// startSSHD starts sshd as root; it needs the account, which it creates
// like sshtest does when missing.
func startSSHD() (_ *sshd, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the ssh targets need root (to run sshd and log in as " + sshUser + ")")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		return nil, fmt.Errorf("the ssh targets need %s: %w", sshdPath, err)
	}
	home, err := sshAccount()
	if err != nil {
		return nil, err
	}
	// Not under env.TempDir (0700): sshd reads authorized_keys as the
	// account.
	dir, err := os.MkdirTemp("", "wsb-sshd-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	s := &sshd{Home: home, Dir: dir, exited: make(chan struct{})}
	cfgFile, err := s.writeKeysAndConfig()
	if err != nil {
		return nil, err
	}
	logPath, err := s.launch(cfgFile)
	if err != nil {
		return nil, err
	}
	if err := s.waitListening(logPath); err != nil {
		return nil, err
	}
	return s, nil
}

// writeKeysAndConfig writes fresh host and user keys, authorized_keys,
// known_hosts and an sshd_config for a free loopback port into s.Dir,
// setting s.Addr, s.IdentityFile and s.KnownHosts; it returns the config.
func (s *sshd) writeKeysAndConfig() (cfgFile string, err error) {
	hostPriv, hostKey, err := newEd25519Key()
	if err != nil {
		return "", err
	}
	userPriv, userKey, err := newEd25519Key()
	if err != nil {
		return "", err
	}
	hostFile, err := s.writePrivateKey("host_ed25519", hostPriv)
	if err != nil {
		return "", err
	}
	if s.IdentityFile, err = s.writePrivateKey("id_ed25519", userPriv); err != nil {
		return "", err
	}
	authKeys, err := s.write("authorized_keys", ssh.MarshalAuthorizedKey(userKey), 0o644)
	if err != nil {
		return "", err
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if s.KnownHosts, err = s.write("known_hosts", []byte(knownhosts.Line([]string{s.Addr}, hostKey)+"\n"), 0o644); err != nil {
		return "", err
	}
	return s.write("sshd_config", []byte(strings.Join([]string{
		"Port " + strconv.Itoa(port), "ListenAddress 127.0.0.1", "HostKey " + hostFile,
		"AuthorizedKeysFile " + authKeys, "PubkeyAuthentication yes", "PasswordAuthentication no",
		"KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", "PermitRootLogin no",
		"AllowUsers " + sshUser, "UseDNS no", "PrintMotd no", "PidFile " + filepath.Join(s.Dir, "sshd.pid"),
		"Subsystem sftp internal-sftp", "MaxStartups 100", "LogLevel ERROR", "",
	}, "\n")), 0o644)
}

// newEd25519Key makes a key pair: the private key and its SSH public key.
func newEd25519Key() (ed25519.PrivateKey, ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return priv, key, nil
}

// write writes data to name in s.Dir and returns its path.
func (s *sshd) write(name string, data []byte, mode os.FileMode) (string, error) {
	p := filepath.Join(s.Dir, name)
	return p, os.WriteFile(p, data, mode)
}

// writePrivateKey writes key in OpenSSH PEM form, mode 0600.
func (s *sshd) writePrivateKey(name string, key ed25519.PrivateKey) (string, error) {
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return "", err
	}
	return s.write(name, pem.EncodeToMemory(block), 0o600)
}

// freeLoopbackPort is a port nothing listened on a moment ago.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port, nil
}

// launch starts sshd on cfgFile in its own process group, logging to
// sshd.log in s.Dir (returned), and closes s.exited when it ends.
func (s *sshd) launch(cfgFile string) (logPath string, err error) {
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return "", err
	}
	logFile, err := os.Create(filepath.Join(s.Dir, "sshd.log"))
	if err != nil {
		return "", err
	}
	defer logFile.Close() // the child has its own descriptor
	s.cmd = exec.Command(sshdPath, "-D", "-e", "-f", cfgFile)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return "", fmt.Errorf("starting sshd: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }() // killed by Stop is the normal end
	return logFile.Name(), nil
}

// waitListening waits up to 10s for sshd to accept on s.Addr; an sshd
// that exits first is reported with its log.
func (s *sshd) waitListening(logPath string) error {
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("sshd exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("sshd not listening on %s after 10s: %w", s.Addr, err), s.Stop())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills sshd's process group (the listener and its per-connection
// children) and removes its files.
func (s *sshd) Stop() error {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // it may have exited already
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
	return os.RemoveAll(s.Dir)
}

// ClientConfig logs in as the account with the generated key, checking
// the host key.
func (s *sshd) ClientConfig() (*ssh.ClientConfig, error) {
	b, err := os.ReadFile(s.IdentityFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, err
	}
	cb, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{User: sshUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: cb, Timeout: 10 * time.Second}, nil
}

// sshAccount returns the account's home, creating the account (with an
// empty home, a usable but passwordless login) when missing.
func sshAccount() (string, error) {
	if _, err := user.Lookup(sshUser); err != nil {
		skel, err := os.MkdirTemp("", "wsb-skel-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(skel)
		if out, err := exec.Command("useradd", "--create-home", "--skel", skel, "--shell", "/bin/bash", sshUser).CombinedOutput(); err != nil {
			if _, lerr := user.Lookup(sshUser); lerr != nil {
				return "", fmt.Errorf("useradd: %v: %s", err, out)
			}
		}
	}
	u, err := user.Lookup(sshUser)
	if err != nil {
		return "", err
	}
	shadow, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return "", err
	}
	if strings.Contains("\n"+string(shadow), "\n"+sshUser+":!") { // locked: sshd refuses keys too
		if out, err := exec.Command("usermod", "-p", "*", sshUser).CombinedOutput(); err != nil {
			return "", fmt.Errorf("usermod: %v: %s", err, out)
		}
	}
	return u.HomeDir, nil
}

// sshInProcess calls an ssh-backend workspace on the loopback sshd and a
// tools.Toolbox directly.
func sshInProcess() Target {
	return Target{Name: "ssh/in-process", Backend: "ssh", Via: ViaInProcess,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			srv, err := startSSHD()
			if err != nil {
				return nil, err
			}
			agentBin, err := env.sftpServer(ctx) // the in-box agent
			if err != nil {
				return nil, errors.Join(err, srv.Stop())
			}
			cfg := sshbackend.NewConfig()
			cfg.AgentBinary = agentBin
			cfg.KnownHostsFiles = []string{srv.KnownHosts}
			cfg.IdentityFiles = []string{srv.IdentityFile}
			cfg.Hosts = map[string]sshbackend.Host{"loopback": {Address: srv.Addr, User: sshUser}}
			b, err := sshbackend.New(cfg, env.Logger.With("backend", "ssh"))
			if err != nil {
				return nil, errors.Join(err, srv.Stop())
			}
			opts, _ := json.Marshal(map[string]string{"host": "loopback"})
			ws, err := b.Create(ctx, opsapi.WorkspaceSpec{ID: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Options: opts})
			if err != nil {
				return nil, errors.Join(err, b.Close(), srv.Stop())
			}
			return inProcessSession(ctx, env, ws, func(ctx context.Context) error {
				var errs []error
				if d, ok := ws.(opsapi.Destroyer); ok {
					errs = append(errs, d.Destroy(ctx))
				}
				return errors.Join(append(errs, b.Close(), srv.Stop())...)
			})
		}}
}

// sshRaw is the floor beneath the ssh backend: one x/crypto/ssh
// connection, a new session running `true` per exec, and a pkg/sftp
// client reading the 4 KiB file directly (open, read, close).
func sshRaw() Target {
	return Target{Name: "ssh/raw", Backend: "ssh", Via: ViaRaw,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			srv, err := startSSHD()
			if err != nil {
				return nil, err
			}
			cfg, err := srv.ClientConfig()
			if err != nil {
				return nil, errors.Join(err, srv.Stop())
			}
			conn, err := ssh.Dial("tcp", srv.Addr, cfg)
			if err != nil {
				return nil, errors.Join(err, srv.Stop())
			}
			fc, err := sftp.NewClient(conn)
			if err != nil {
				return nil, errors.Join(err, conn.Close(), srv.Stop())
			}
			closeAll := func(context.Context) error { return errors.Join(fc.Close(), conn.Close(), srv.Stop()) }
			dir := path.Join(srv.Home, fmt.Sprintf(".wsbroker/bench-raw-%d", time.Now().UnixNano()))
			file := path.Join(dir, path.Base(file4K))
			if err := sftpPut(fc, file, content4K); err != nil {
				return nil, errors.Join(err, closeAll(ctx))
			}
			rawTrue := func(context.Context) error {
				s, err := conn.NewSession()
				if err != nil {
					return err
				}
				defer s.Close()
				return s.Run("true")
			}
			return &Session{
				PID: os.Getpid(),
				NewClient: func(int) (Client, error) {
					return Client{
						opRead4K: func(context.Context) error {
							f, err := fc.Open(file)
							if err != nil {
								return err
							}
							n, err := io.Copy(io.Discard, f)
							if cerr := f.Close(); err == nil {
								err = cerr
							}
							if err == nil && n != size4K {
								err = fmt.Errorf("read %d bytes, want %d", n, size4K)
							}
							return err
						},
						opExecTrue: rawTrue,
						// The bash tool's baseline too, measured in
						// the same turns as the tool's row.
						toolBashTrue: rawTrue,
					}, nil
				},
				Close: func(ctx context.Context) error {
					return errors.Join(fc.RemoveAll(dir), closeAll(ctx))
				},
			}, nil
		}}
}

// sftpPut writes data to p, making its directory.
func sftpPut(fc *sftp.Client, p string, data []byte) error {
	if err := fc.MkdirAll(path.Dir(p)); err != nil {
		return err
	}
	f, err := fc.Create(p)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// sshHTTP drives a `broker serve` configured with the ssh backend (the
// loopback sshd as host "loopback") through the Go client.
func sshHTTP() Target {
	return Target{Name: "ssh/http", Backend: "ssh", Via: ViaHTTP,
		Setup: func(ctx context.Context, env *Env) (*Session, error) {
			// The broker finds the in-box agent beside its executable.
			if _, err := env.sftpServer(ctx); err != nil {
				return nil, err
			}
			srv, err := startSSHD()
			if err != nil {
				return nil, err
			}
			proc, err := startBroker(ctx, env, "--ssh-known-hosts", srv.KnownHosts, "--ssh-identity", srv.IdentityFile,
				"--ssh-host", "loopback="+sshUser+"@"+srv.Addr)
			if err != nil {
				return nil, errors.Join(err, srv.Stop())
			}
			stop := func() error { return errors.Join(proc.Stop(), srv.Stop()) }
			c := client.New(proc.URL, proc.Token)
			opts, _ := json.Marshal(map[string]string{"host": "loopback"})
			info, err := c.CreateWorkspace(ctx, "ssh", opts)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("creating a workspace: %w", err), stop())
			}
			if err := seed(ctx, c.WorkspaceFor(info)); err != nil {
				return nil, errors.Join(err, c.DeleteWorkspace(ctx, info.ID), stop())
			}
			return &Session{
				PID: proc.PID,
				NewClient: func(i int) (Client, error) {
					ws := client.New(proc.URL, proc.Token).WorkspaceFor(info)
					return workspaceClient(ws, ws.CallTool, env.Config, i), nil
				},
				Close: func(ctx context.Context) error {
					return errors.Join(c.DeleteWorkspace(ctx, info.ID), stop())
				},
			}, nil
		}}
}
