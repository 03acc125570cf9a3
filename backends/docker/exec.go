package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/wsbroker/wsbroker/internal/execpump"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/remoteexec"
)

// baseEnv is added to every exec's environment, over the image's.
var baseEnv = []string{"LANG=C.UTF-8", "TERM=dumb"}

// inspectTimeout bounds the exec inspect that reads an exit status.
const inspectTimeout = 30 * time.Second

// execOpts describe one exec.
type execOpts struct {
	argv  []string
	env   []string // added to baseEnv
	stdin bool     // attach stdin (the SFTP channel); otherwise it is empty
	// stderr receives the exec's stderr when set (it must not block);
	// otherwise Stderr gives a pipe that must be read.
	stderr io.Writer
}

// execProc is one docker exec: its attach stream demultiplexed into
// stdout and stderr. It is remoteexec's Process.
type execProc struct {
	x      *box
	id     string
	conn   net.Conn
	stdout *io.PipeReader
	stderr io.Reader

	demuxed chan struct{} // closed when the attach stream has ended

	once     sync.Once
	waitDone chan struct{}
	st       remoteexec.Status
	err      error
}

// startExec creates an exec in the workspace's container, in the
// workspace root, and attaches to it (which starts it). The working
// directory given to the engine is always the root: a caller's directory
// is entered by the command itself, inside the container, so runc never
// sees it (CVE-2024-21626).
func (x *box) startExec(ctx context.Context, o execOpts) (*execProc, error) {
	const op = "docker.exec"
	cfg := container.ExecOptions{
		Cmd:          o.argv,
		Env:          append(append([]string(nil), baseEnv...), o.env...),
		WorkingDir:   x.root,
		AttachStdin:  o.stdin,
		AttachStdout: true,
		AttachStderr: true,
	}
	created, err := x.b.api.ContainerExecCreate(ctx, x.cid, cfg)
	if err != nil && isNotRunning(err) {
		// Stopped behind our back (engine restart without a restart
		// policy, a manual stop): start it again.
		if serr := x.b.api.ContainerStart(ctx, x.cid, container.StartOptions{}); serr == nil {
			x.logger.Warn("workspace container was not running; started it again")
			created, err = x.b.api.ContainerExecCreate(ctx, x.cid, cfg)
		}
	}
	if err != nil {
		return nil, x.engineErr(op, err)
	}
	hj, err := x.b.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, x.engineErr(op, err)
	}
	outR, outW := io.Pipe()
	p := &execProc{x: x, id: created.ID, conn: hj.Conn, stdout: outR, demuxed: make(chan struct{}), waitDone: make(chan struct{})}
	errW := o.stderr
	var errPW *io.PipeWriter
	if errW == nil {
		var errR *io.PipeReader
		errR, errPW = io.Pipe()
		p.stderr, errW = errR, errPW
	}
	go func() {
		// Tty is off, so the stream is multiplexed (API < 1.42 says
		// nothing in its media type; it always is then).
		_, err := stdcopy.StdCopy(outW, errW, hj.Reader)
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		if errPW != nil {
			errPW.CloseWithError(err)
		}
		close(p.demuxed)
	}()
	return p, nil
}

func (p *execProc) Stdout() io.Reader { return p.stdout }

// Stdin is the exec's stdin (attached with execOpts.stdin); its Close
// half-closes the connection, so the process reads EOF.
func (p *execProc) Stdin() io.WriteCloser { return stdin{p.conn} }

// Done is closed when the attach stream has ended.
func (p *execProc) Done() <-chan struct{} { return p.demuxed }

type stdin struct{ net.Conn }

func (s stdin) Close() error {
	if cw, ok := s.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.Conn.Close()
}

func (p *execProc) Stderr() io.Reader {
	if p.stderr == nil {
		return strings.NewReader("")
	}
	return p.stderr
}

// Close drops the attach connection; the process itself is not touched.
func (p *execProc) Close() error {
	err := p.conn.Close()
	p.stdout.CloseWithError(io.ErrClosedPipe)
	if pr, ok := p.stderr.(*io.PipeReader); ok {
		pr.CloseWithError(io.ErrClosedPipe)
	}
	return err
}

// Wait waits for the attach stream to end, then asks the engine for the
// exit status. A container that is gone, or an exec still running after
// its stream ended (the connection was dropped), is a transport failure.
func (p *execProc) Wait() (remoteexec.Status, error) {
	p.once.Do(func() {
		defer close(p.waitDone)
		<-p.demuxed
		ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
		defer cancel()
		for attempt := 0; ; attempt++ {
			ins, err := p.x.b.api.ContainerExecInspect(ctx, p.id)
			if err != nil {
				p.st, p.err = remoteexec.Status{Code: -1}, p.x.engineErr("docker.exec", err)
				return
			}
			if !ins.Running {
				p.st = remoteexec.Status{Code: ins.ExitCode}
				if ins.ExitCode > 128 {
					p.st.Signal = remoteexec.SignalName(ins.ExitCode - 128)
				}
				return
			}
			// The stream can end a moment before the engine records
			// the exit; an exec still running after that was cut off.
			if attempt == 20 {
				p.st, p.err = remoteexec.Status{Code: -1}, errors.New("exec stream ended while the process runs")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	<-p.waitDone
	return p.st, p.err
}

// start is remoteexec's StartFunc.
func (x *box) start(ctx context.Context, argv []string) (remoteexec.Process, error) {
	p, err := x.startExec(ctx, execOpts{argv: argv})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// maxRunOutput caps what run keeps of a short command's output.
const maxRunOutput = 1 << 20

// run is remoteexec's RunFunc: a short command (the kill script) in an
// exec of its own. A non-zero exit is an error carrying its stderr.
func (x *box) run(ctx context.Context, argv []string) ([]byte, error) {
	stderr := &execpump.Head{Max: 4096}
	p, err := x.startExec(ctx, execOpts{argv: argv, stderr: stderr})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	out, rerr := io.ReadAll(io.LimitReader(p.Stdout(), maxRunOutput))
	// Past the cap, output is dropped so the command can finish.
	_, _ = io.Copy(io.Discard, p.Stdout())
	st, err := p.Wait()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return out, err
	}
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return out, opsapi.E("docker.exec", "", opsapi.ErrUnavailable, rerr)
	}
	if st.Code != 0 {
		return out, fmt.Errorf("%s exited with %d: %s", argv[0], st.Code, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
