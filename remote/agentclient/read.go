package agentclient

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/agent"
)

// ReadFile opens the regular file at the absolute path abs as a raw byte
// stream (agent.OpRead), for large reads at the connection's speed. An
// agent older than agent.RawVersion answers errors.ErrUnsupported, so
// the caller reads over SFTP. A failure to open is a *fs.PathError with
// the agent's errno, or opsapi.ErrInvalid for what is not a regular
// file. Reading ends with ctx: the stream is closed and Read returns
// ctx's error.
func (c *Client) ReadFile(ctx context.Context, abs string) (io.ReadCloser, error) {
	st, stop, err := c.openRaw(ctx, agent.Request{Op: agent.OpRead, Path: abs})
	if err != nil {
		return nil, err
	}
	rep, err := agent.ReadReadReply(st)
	if err == nil && rep.Errno != 0 {
		err = &fs.PathError{Op: "open", Path: abs, Err: syscall.Errno(rep.Errno)}
	}
	if err == nil && rep.Invalid != "" {
		err = opsapi.E("agent.read", abs, opsapi.ErrInvalid, errors.New(rep.Invalid))
	}
	if err != nil {
		stop()
		st.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return &fileStream{ctx: ctx, st: st, stop: stop, left: rep.Size, sized: rep.Size > 0, path: abs}, nil
}

// fileStream is a file's bytes on an OpRead stream.
type fileStream struct {
	ctx   context.Context
	st    net.Conn
	stop  func() bool
	left  int64
	sized bool // left counts down to 0; otherwise read to the end
	path  string
}

func (r *fileStream) Read(p []byte) (int, error) {
	if r.sized {
		if r.left == 0 {
			return 0, io.EOF
		}
		if int64(len(p)) > r.left {
			p = p[:r.left]
		}
	}
	n, err := r.st.Read(p)
	r.left -= int64(n)
	switch {
	case err == nil:
		return n, nil
	case r.ctx.Err() != nil:
		return n, r.ctx.Err()
	case errors.Is(err, io.EOF) && r.sized:
		return n, fmt.Errorf("reading %s: the file ended %d bytes short of its size (it shrank, or the agent failed): %w", r.path, r.left, io.ErrUnexpectedEOF)
	}
	return n, err
}

func (r *fileStream) Close() error {
	r.stop()
	return r.st.Close()
}

// abortWait bounds how long an aborted write waits for the agent to say
// it dropped its temporary file.
const abortWait = 5 * time.Second

// WriteFile replaces the file at the absolute path abs with what r
// yields, atomically, in one round trip (agent.OpWrite: the rules of
// SFTP's AtomicWrite, for any size), fsynced when sync is set. An agent
// older than agent.RawVersion answers errors.ErrUnsupported before r is
// read. When r fails or ctx ends, the stream ends without its last
// chunk, the agent drops what it wrote, and the file is untouched.
func (c *Client) WriteFile(ctx context.Context, abs string, r io.Reader, sync bool) error {
	st, stop, err := c.openRaw(ctx, agent.Request{Op: agent.OpWrite, Path: abs, Sync: sync})
	if err != nil {
		return err
	}
	defer stop()
	defer st.Close()
	if _, err := agent.WriteChunks(st, r); err != nil {
		// The stream ended without its last chunk: the agent removes its
		// temporary file, then answers. Wait for that answer (the stream
		// is half closed), so nothing of the write is left when this
		// returns, a cancel included; on a slow transport the listing
		// right after a failed write otherwise still shows the temporary
		// file. The wait is bounded: the agent answers at once.
		_ = st.Close()
		_ = st.SetReadDeadline(time.Now().Add(abortWait))
		_, _ = agent.ReadWriteReply(st)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	rep, err := agent.ReadWriteReply(st)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("agent write %s: %w", abs, err)
	case rep.Errno != 0:
		return &fs.PathError{Op: "write", Path: abs, Err: syscall.Errno(rep.Errno)}
	}
	return nil
}

// ReadDir lists the directory at the absolute path abs in one round trip
// (agent.OpReadDir), sorted by name. An agent older than agent.RawVersion
// answers errors.ErrUnsupported. A failure is a *fs.PathError with the
// agent's errno.
func (c *Client) ReadDir(ctx context.Context, abs string) ([]opsapi.FileInfo, error) {
	st, stop, err := c.openRaw(ctx, agent.Request{Op: agent.OpReadDir, Path: abs})
	if err != nil {
		return nil, err
	}
	defer stop()
	defer st.Close()
	rep, err := agent.ReadReadDirReply(st)
	var entries []agent.DirEntry
	switch {
	case err != nil:
	case rep.Errno != 0:
		err = &fs.PathError{Op: "readdir", Path: abs, Err: syscall.Errno(rep.Errno)}
	default:
		err = gob.NewDecoder(st).Decode(&entries)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	out := make([]opsapi.FileInfo, len(entries))
	for i, e := range entries {
		out[i] = e.FileInfo()
	}
	return out, nil
}

// openRaw opens a stream for one of the version-4 file requests, closed
// when ctx ends until stop is called. An older agent is
// errors.ErrUnsupported, before anything is sent.
func (c *Client) openRaw(ctx context.Context, req agent.Request) (net.Conn, func() bool, error) {
	if c.Version < agent.RawVersion {
		return nil, nil, errors.ErrUnsupported
	}
	st, err := c.open(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return st, context.AfterFunc(ctx, func() { st.Close() }), nil
}
