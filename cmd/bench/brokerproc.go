package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	brokerStartTimeout = 30 * time.Second
	brokerStopTimeout  = 20 * time.Second
)

// brokerProcess is a `broker serve` started as a user would start it:
// its own process, a free loopback port, a fresh state directory, and
// the token it writes there.
type brokerProcess struct {
	URL     string
	Token   string
	PID     int
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string
	dir     string
}

// startBroker starts a broker on a free port and waits until it answers
// /healthz. A port taken between choosing and binding it is retried.
// extra are more `broker serve` flags (a backend's configuration).
func startBroker(ctx context.Context, env *Env, extra ...string) (*brokerProcess, error) {
	bin, err := env.brokerBinary(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 3 {
		p, err := startBrokerOnce(ctx, env, bin, extra)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func startBrokerOnce(ctx context.Context, env *Env, bin string, extra []string) (*brokerProcess, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(env.TempDir, "broker-")
	if err != nil {
		return nil, err
	}
	stateDir := filepath.Join(dir, "state")
	logPath := filepath.Join(dir, "broker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--state-dir", stateDir,
		"--log-level", env.Config.BrokerLogLevel}, extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "BROKER_CONFIG=") // no stray config file
	// Its own process group, so a Ctrl-C of the harness reaches it only
	// through Stop (the harness stops it gracefully).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("starting %s: %w", bin, err), os.RemoveAll(dir))
	}
	p := &brokerProcess{URL: "http://" + addr, PID: cmd.Process.Pid, cmd: cmd,
		exited: make(chan struct{}), logPath: logPath, dir: dir}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitReady(ctx); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	tok, err := os.ReadFile(filepath.Join(stateDir, "token"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reading the broker's token: %w", err), p.Stop())
	}
	p.Token = strings.TrimSpace(string(tok))
	return p, nil
}

// waitReady polls /healthz until it answers 200, the process exits or
// brokerStartTimeout passes.
func (p *brokerProcess) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, brokerStartTimeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/healthz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("broker exited before it was ready (%v); log:\n%s", p.waitErr, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("broker not ready after %s: %w; log:\n%s", brokerStartTimeout, ctx.Err(), p.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// get is the body of GET path on the broker, which must answer 200.
func (p *brokerProcess) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(body), err
}

// Stop sends SIGTERM (graceful shutdown), then SIGKILL after
// brokerStopTimeout, and removes the state directory.
func (p *brokerProcess) Stop() error {
	var errs []error
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, err)
	}
	select {
	case <-p.exited:
		if p.waitErr != nil {
			errs = append(errs, fmt.Errorf("broker exited with %w; log:\n%s", p.waitErr, p.logTail()))
		}
	case <-time.After(brokerStopTimeout):
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		<-p.exited
		errs = append(errs, fmt.Errorf("broker ignored SIGTERM for %s and was killed; log:\n%s", brokerStopTimeout, p.logTail()))
	}
	return errors.Join(append(errs, os.RemoveAll(p.dir))...)
}

// logTail returns the end of the broker's log, for error messages.
func (p *brokerProcess) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	const keep = 4 << 10
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a
// moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
