package ssh

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agentbin"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// agentName is the in-box agent's binary (it also serves SFTP).
const agentName = "wsb-agent"

// agentCacheDir is where hosts keep uploaded agents, by content hash,
// relative to the account's home.
const agentCacheDir = ".cache/wsbroker"

// agentStartTimeout bounds uploading and starting an agent.
const agentStartTimeout = 30 * time.Second

// agentBinary is the local agent to upload: its path and content hash.
type agentBinary struct {
	path string
	hash string // hex, the first 16 bytes of its SHA-256
}

// findAgent locates the agent binary when the configuration wants one;
// a configured one that is unusable is an error, a missing default one
// turns the agent off.
func (b *Backend) findAgent() error {
	if b.cfg.InboxAgent == InboxAgentOff {
		return nil
	}
	p, err := agentbin.Find(b.cfg.AgentBinary, agentName)
	if err == nil {
		var data []byte
		if data, err = os.ReadFile(p); err == nil {
			sum := sha256.Sum256(data)
			b.agent = &agentBinary{path: p, hash: hex.EncodeToString(sum[:16])}
			return nil
		}
	}
	if b.cfg.AgentBinary != "" {
		return err
	}
	b.logger.Info("no in-box agent binary; commands run in a session each", "reason", err)
	return nil
}

// unameArch is `uname -m` for each Go architecture the agent is built for.
var unameArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "arm": "armv7l"}

// startAgent uploads the agent to the host when it has not got this
// build, starts it on a session of its own and speaks its protocol over
// the session's stdio (the SSH connection already encrypts and
// authenticates). An error leaves the host on per-command sessions.
func (h *host) startAgent(client *ssh.Client, sc *sftp.Client, home string) (*agentclient.Client, error) {
	a := h.b.agent
	if a == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentStartTimeout)
	defer cancel()
	s, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	out, err := s.Output("uname -sm")
	s.Close()
	if err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	if want := "Linux " + unameArch[runtime.GOARCH]; strings.TrimSpace(string(out)) != want {
		return nil, fmt.Errorf("the host is %q, the agent is built for %q", strings.TrimSpace(string(out)), want)
	}
	remote := path.Join(home, agentCacheDir, "agent-"+a.hash)
	if err := h.upload(sc, a.path, remote); err != nil {
		return nil, fmt.Errorf("uploading the agent: %w", err)
	}
	s, err = client.NewSession()
	if err != nil {
		return nil, err
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Start("exec " + remoteexec.Quote(remote) + " serve --stdio"); err != nil {
		s.Close()
		return nil, err
	}
	c, err := agentclient.New(ctx, sessionConn{Reader: stdout, WriteCloser: stdin, s: s})
	if err != nil {
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	return c, nil
}

// upload puts the local file at remote unless a file of its size is
// there (the name holds the content's hash): written to a temporary
// name, made executable by the owner only, then renamed into place.
func (h *host) upload(sc *sftp.Client, local, remote string) error {
	lfi, err := os.Stat(local)
	if err != nil {
		return err
	}
	if fi, err := sc.Stat(remote); err == nil && fi.Size() == lfi.Size() && fi.Mode().IsRegular() {
		return nil
	}
	if err := sc.MkdirAll(path.Dir(remote)); err != nil {
		return err
	}
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := remote + ".tmp-" + randomHex()
	dst, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sc.Chmod(tmp, 0o500)
	}
	if err == nil {
		err = sc.PosixRename(tmp, remote)
	}
	if err != nil {
		_ = sc.Remove(tmp)
		return err
	}
	h.log.Info("uploaded the in-box agent", "path", remote)
	return nil
}

// sessionConn is a session's stdio as the agent connection.
type sessionConn struct {
	io.Reader
	io.WriteCloser
	s *ssh.Session
}

func (c sessionConn) Close() error {
	return errors.Join(c.WriteCloser.Close(), c.s.Close())
}

// Transport says whether the workspace's commands go through the host's
// agent (opsapi.TransportReporter). Files always use the connection's own
// SFTP subsystem.
func (w *Workspace) Transport() opsapi.Transport {
	b := w.host.b
	switch {
	case b.cfg.InboxAgent == InboxAgentOff:
		return opsapi.Transport{Detail: "inboxAgent: off in the configuration"}
	case b.agent == nil:
		return opsapi.Transport{Detail: "no agent binary for this host"}
	}
	h := w.host
	h.mu.Lock()
	c := h.cur
	h.mu.Unlock()
	switch {
	case c == nil || c.dead.Load():
		return opsapi.Transport{Agent: true, Detail: "the agent starts with the next connection"}
	case c.agent == nil:
		return opsapi.Transport{Detail: c.noAgent}
	case c.agent.IsClosed():
		return opsapi.Transport{Detail: "the agent's session ended; commands run in a session each until the next connection"}
	}
	return opsapi.Transport{Agent: true}
}

// agentFor is the host's live agent, nil when it has none.
func (h *host) agentFor(ctx context.Context) *agentclient.Client {
	c, err := h.get(ctx)
	if err != nil || c.agent == nil || c.agent.IsClosed() {
		return nil
	}
	return c.agent
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// agentExec runs req through the agent with the environment the session
// path gives: LANG, TERM, the request's, and the workspace's marker.
func (w *Workspace) agentExec(ctx context.Context, a *agentclient.Client, req opsapi.ExecRequest) (opsapi.ExecResult, error) {
	cfg := w.host.b.cfg
	env := append(append([]string{"LANG=C.UTF-8", "TERM=dumb"}, req.Env...), w.marker)
	res, err := a.Exec(ctx, req, opsapi.Resolve(w.root, req.Cwd), env, cfg.Exec)
	if err != nil {
		return res, opsapi.E("ssh.Exec", req.Cwd, nil, err)
	}
	return res, nil
}
