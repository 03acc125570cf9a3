package sshexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/wsbroker/wsbroker/remote"
	"github.com/wsbroker/wsbroker/remote/agentclient"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// AgentCacheDir is where hosts keep uploaded agents, by content hash,
// relative to the account's home.
const AgentCacheDir = ".cache/wsbroker"

// unameArch is `uname -m` for each Go architecture the agent is built for.
var unameArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "arm": "armv7l"}

// StartAgent uploads the agent bin to the host of c when it has not got
// this build (into AgentCacheDir under home, over sc), starts it on a
// session of its own and speaks its protocol over the session's stdio
// (remote.StartStdio). A host that is not Linux on the broker's
// architecture is an error.
func StartAgent(ctx context.Context, c *ssh.Client, sc *sftp.Client, bin remote.AgentBinary, home string, logger *slog.Logger) (*agentclient.Client, error) {
	s, err := c.NewSession()
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
	dst := path.Join(home, AgentCacheDir, "agent-"+bin.Hash[:32])
	if err := upload(sc, bin.Path, dst, logger); err != nil {
		return nil, fmt.Errorf("uploading the agent: %w", err)
	}
	client, _, err := remote.StartStdio(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
		s, err := c.NewSession()
		if err != nil {
			return err
		}
		defer s.Close()
		s.Stdin, s.Stdout, s.Stderr = stdin, stdout, stderr
		stop := context.AfterFunc(ctx, func() { s.Close() })
		defer stop()
		return s.Run("exec " + remoteexec.Quote(dst) + " serve --stdio")
	})
	return client, err
}

// upload puts the local file at remote unless a file of its size is
// there (the name holds the content's hash): written to a temporary name,
// made executable by the owner only, then renamed into place.
func upload(sc *sftp.Client, local, remote string, logger *slog.Logger) error {
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
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tmp := remote + ".tmp-" + hex.EncodeToString(b)
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
	logger.Info("uploaded the in-box agent", "path", remote)
	return nil
}
