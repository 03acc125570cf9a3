package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
)

// The hostile scenario (issue 14's "done when"): one broker process takes
// HostileClients slow uploads, as many streaming execs read slowly, and a
// burst of unauthenticated requests with huge queries, all at once, while
// a probe asks /healthz every 10 ms. Its rows:
const (
	// hostileHealthz is the probe: its latency is what a load balancer
	// sees, its PEAK RSS the broker's over the whole load.
	hostileHealthz = "hostile.healthz"
	// hostileBare is the same probe of a bare net/http server in the
	// probe's own process: what the machine alone adds at those moments.
	hostileBare = "hostile.healthz-bare"
	// hostileUploads are the slow PUT /files uploads, each one call; an
	// error is one that failed or was not read back byte-identical.
	hostileUploads = "hostile.slow-upload"
	// hostileExecs are the streaming execs, each one call; an error is
	// one that did not exit 0 with its whole output, byte for byte.
	hostileExecs = "hostile.stream-exec"
	// hostileUnauth is the burst; an error is an answer other than 401
	// (audited) or 429 (rate-limited before anything is written).
	hostileUnauth = "hostile.unauth"
	// hostileDownloads are large GET /files read slowly; an error is one
	// that did not bring every byte.
	hostileDownloads = "hostile.slow-download"
)

var hostileRows = []string{hostileHealthz, hostileBare, hostileUploads, hostileExecs, hostileDownloads, hostileUnauth}

const (
	hostileUploadBytes = 128 << 10 // per upload, sent over HostileTime
	hostileExecInput   = 512 << 10 // zeros piped through base64 per exec
	hostileQueryBytes  = 60 << 10  // an unauthenticated request's query
	hostileUnauthConns = 32        // requests of the burst in flight at once
	hostileUnauthPeers = 8         // source addresses they come from
	healthzEvery       = 10 * time.Millisecond
	hostileChunk       = 1 << 10 // bytes a slow upload sends at a time
	// One large download read slowly per this many uploads, of a file
	// of hostileDownloadBytes.
	hostileDownloadEvery = 10
	hostileDownloadBytes = 16 << 20
)

// The loopback addresses each kind of client comes from, so each is its
// own peer for the broker's per-peer limits (as separate hosts would be).
// Linux answers all of 127/8 on lo; elsewhere the dial falls back to the
// default source address.
const (
	probePeer  = "127.0.0.2"
	uploadPeer = "127.0.0.3"
	execPeer   = "127.0.0.4"
	unauthNet  = "127.0.1." // .1 to .hostileUnauthPeers
)

// onLocalHTTP picks the local backend's broker process: the scenario is
// about what the broker holds, so one backend is enough.
func onLocalHTTP(t Target) bool { return t.Backend == "local" && t.Via == ViaHTTP }

// hostileRun is one run of the scenario: what it sends and what came back.
type hostileRun struct {
	cfg    Config
	broker *brokerProcess
	ws     *client.Workspace

	healthz, bare, uploads, execs, downloads, unauth Recorder
	status401, status429                             atomic.Int64
}

// runHostile runs the four loads at once on a workspace of its own and
// reports a row for each.
func runHostile(ctx context.Context, env *Env, s *Session, rows []string) ([]Result, error) {
	if s.Broker == nil {
		return nil, nil
	}
	cfg := env.Config
	ctx, cancel := context.WithTimeout(ctx, 3*cfg.HostileTime+2*time.Minute)
	defer cancel()
	c := client.New(s.Broker.URL, s.Broker.Token)
	info, err := c.CreateWorkspace(ctx, "local", nil)
	if err != nil {
		return nil, fmt.Errorf("creating a workspace: %w", err)
	}
	h := &hostileRun{cfg: cfg, broker: s.Broker, ws: c.WorkspaceFor(info)}
	res, err := h.run(ctx, s.PID)
	if derr := c.DeleteWorkspace(context.WithoutCancel(ctx), info.ID); derr != nil {
		err = errors.Join(err, fmt.Errorf("deleting the workspace: %w", derr))
	}
	var out []Result
	for _, r := range res {
		for _, want := range rows {
			if r.Name == want {
				out = append(out, r)
			}
		}
	}
	return out, err
}

func (h *hostileRun) run(ctx context.Context, pid int) ([]Result, error) {
	if err := h.ws.Mkdir(ctx, "hostile"); err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	body, err := exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf("head -c %d /dev/zero | base64", hostileExecInput)).Output()
	if err != nil {
		return nil, fmt.Errorf("the execs' expected output: %w", err)
	}
	uploads := make([]uploadCall, h.cfg.HostileClients)
	for i := range uploads {
		uploads[i] = uploadCall{path: fmt.Sprintf("hostile/up-%04d.bin", i), data: uploadContent(i, hostileUploadBytes)}
	}
	big := uploadContent(-1, hostileDownloadBytes)
	if err := h.ws.WriteFile(ctx, bigFile, bytes.NewReader(big)); err != nil {
		return nil, fmt.Errorf("writing the file to download: %w", err)
	}
	bigSum := sha256.Sum256(big)

	probe, err := startProbe(ctx, h.broker.URL)
	if err != nil {
		return nil, err
	}
	proc := StartSampler(pid, h.cfg.SampleEvery)
	probeProc := StartSampler(probe.cmd.Process.Pid, h.cfg.SampleEvery)
	start := time.Now()
	for _, r := range []*Recorder{&h.healthz, &h.bare, &h.uploads, &h.execs, &h.downloads, &h.unauth} {
		r.Start(start)
	}
	var load sync.WaitGroup
	for i := range uploads {
		load.Go(func() { h.upload(ctx, &uploads[i]) })
	}
	execUp := newLoopbackClient(execPeer, h.cfg.HostileClients)
	execWS := client.New(h.broker.URL, h.broker.Token, client.WithHTTPClient(execUp)).Workspace(h.ws.ID())
	for i := range h.cfg.HostileClients {
		load.Go(func() { h.exec(ctx, execWS, i, body) })
	}
	for range max(1, h.cfg.HostileClients/hostileDownloadEvery) {
		load.Go(func() { h.download(ctx, bigSum) })
	}
	load.Go(func() { h.burst(ctx) })
	load.Wait()
	probeUsage := probeProc.Stop()
	perr := probe.stop(&h.healthz, &h.bare)
	usage := proc.Stop()
	stop := time.Now()
	for _, r := range []*Recorder{&h.healthz, &h.bare, &h.execs, &h.downloads, &h.unauth} {
		r.Stop(stop)
	}
	// Uploads count as lost unless read back whole; the reads are not
	// part of the load.
	h.verifyUploads(ctx, uploads)
	h.uploads.Stop(stop)
	return h.results(usage, probeUsage), errors.Join(perr, ctx.Err())
}

// results are the rows: the broker's usage on each, but the probe
// process's on the bare server's.
func (h *hostileRun) results(usage, probeUsage Usage) []Result {
	cfg := h.cfg
	perSec := func(n int) string { return roughBytes(float64(n)/cfg.HostileTime.Seconds()) + "/s" }
	execOut := int(base64Len(hostileExecInput))
	return []Result{
		{Name: hostileHealthz, Stats: h.healthz.Stats(), Usage: usage,
			Note: fmt.Sprintf("GET /healthz every %s during %d slow uploads, %d streaming execs, %d unauthenticated requests",
				healthzEvery, cfg.HostileClients, cfg.HostileClients, cfg.HostileUnauth)},
		{Name: hostileBare, Stats: h.bare.Stats(), Usage: probeUsage,
			Note: "the same probe of a bare net/http server in the probe's process (its RSS): the machine's share"},
		{Name: hostileUploads, Stats: h.uploads.Stats(), Usage: usage,
			Note: fmt.Sprintf("PUT /files of %s at %s, %s apart; read back byte-identical", formatBytes(hostileUploadBytes),
				perSec(hostileUploadBytes), formatBytes(hostileChunk))},
		{Name: hostileExecs, Stats: h.execs.Stats(), Usage: usage,
			Note: fmt.Sprintf("%s of base64 each, read at %s; exit 0 and every byte", roughBytes(float64(execOut)), perSec(execOut))},
		{Name: hostileDownloads, Stats: h.downloads.Stats(), Usage: usage,
			Note: fmt.Sprintf("GET /files of %s read at %s; every byte", formatBytes(hostileDownloadBytes),
				perSec(hostileDownloadBytes))},
		{Name: hostileUnauth, Stats: h.unauth.Stats(), Usage: usage,
			Note: fmt.Sprintf("%s queries, %d at once from %d peers: %d answered 401 (audited), %d 429",
				formatBytes(hostileQueryBytes), hostileUnauthConns, hostileUnauthPeers, h.status401.Load(), h.status429.Load())},
	}
}

// uploadCall is one slow upload and how it went.
type uploadCall struct {
	path    string
	data    []byte
	latency time.Duration
	err     error
}

// uploadContent is n bytes for upload i: distinct per upload, so a file
// that got another's body does not pass.
func uploadContent(i, n int) []byte {
	b := make([]byte, n)
	x := uint32(i)*2654435761 + 1
	for j := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = byte(x)
	}
	return b
}

func (h *hostileRun) upload(ctx context.Context, u *uploadCall) {
	hc := newLoopbackClient(uploadPeer, 1)
	ws := client.New(h.broker.URL, h.broker.Token, client.WithHTTPClient(hc)).Workspace(h.ws.ID())
	t0 := time.Now()
	u.err = ws.WriteFile(ctx, u.path, &slowReader{data: u.data, rate: float64(len(u.data)) / h.cfg.HostileTime.Seconds()})
	u.latency = time.Since(t0)
	hc.CloseIdleConnections()
}

// verifyUploads reads every finished upload back and records each.
func (h *hostileRun) verifyUploads(ctx context.Context, uploads []uploadCall) {
	for i := range uploads {
		u := &uploads[i]
		if u.err == nil {
			u.err = h.readBack(ctx, u)
		}
		h.uploads.Record(u.latency, u.err)
	}
}

func (h *hostileRun) readBack(ctx context.Context, u *uploadCall) error {
	rc, err := h.ws.Open(ctx, u.path)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", u.path, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", u.path, err)
	}
	if !bytes.Equal(got, u.data) {
		return fmt.Errorf("%s: read back %d bytes that differ from the %d sent", u.path, len(got), len(u.data))
	}
	return nil
}

// exec runs exec i, whose output is body then a line naming i, and reads
// it at a pace that spreads it over HostileTime.
func (h *hostileRun) exec(ctx context.Context, ws *client.Workspace, i int, body []byte) {
	marker := fmt.Sprintf("exec %d done\n", i)
	want := sha256.Sum256(append(append([]byte(nil), body...), marker...))
	total := len(body) + len(marker)
	out := &slowWriter{h: sha256.New(), rate: float64(total) / h.cfg.HostileTime.Seconds()}
	t0 := time.Now()
	res, err := ws.Exec(ctx, opsapi.ExecRequest{
		Command: fmt.Sprintf("head -c %d /dev/zero | base64; echo 'exec %d done'", hostileExecInput, i),
		Output:  out,
		Timeout: 3*h.cfg.HostileTime + time.Minute,
	})
	lat := time.Since(t0)
	switch {
	case err != nil:
	case res.ExitCode != 0 || res.Canceled || res.TimedOut:
		err = fmt.Errorf("exec %d: exit %d (canceled %t, timed out %t)", i, res.ExitCode, res.Canceled, res.TimedOut)
	case out.n != int64(total) || !bytes.Equal(out.h.Sum(nil), want[:]):
		err = fmt.Errorf("exec %d: %d bytes of output that differ from the %d expected", i, out.n, total)
	}
	h.execs.Record(lat, err)
}

// bigFile is the file the slow downloads read.
const bigFile = "hostile/big.bin"

// download reads bigFile at a pace that spreads it over HostileTime, so
// the broker must hold the file back rather than buffer it.
func (h *hostileRun) download(ctx context.Context, want [sha256.Size]byte) {
	hc := newLoopbackClient(execPeer, 1)
	ws := client.New(h.broker.URL, h.broker.Token, client.WithHTTPClient(hc)).Workspace(h.ws.ID())
	out := &slowWriter{h: sha256.New(), rate: float64(hostileDownloadBytes) / h.cfg.HostileTime.Seconds()}
	t0 := time.Now()
	rc, err := ws.Open(ctx, bigFile)
	if err == nil {
		_, err = io.Copy(out, rc)
		rc.Close()
	}
	if err == nil && (out.n != hostileDownloadBytes || !bytes.Equal(out.h.Sum(nil), want[:])) {
		err = fmt.Errorf("download: %d bytes that differ from the %d of %s", out.n, hostileDownloadBytes, bigFile)
	}
	h.downloads.Record(time.Since(t0), err)
	hc.CloseIdleConnections()
}

// burst sends HostileUnauth requests with a wrong token and a huge query,
// hostileUnauthConns at once from hostileUnauthPeers addresses.
func (h *hostileRun) burst(ctx context.Context) {
	url := h.broker.URL + "/v1/workspaces?q=" + strings.Repeat("a", hostileQueryBytes)
	clients := make([]*http.Client, hostileUnauthPeers)
	for i := range clients {
		clients[i] = newLoopbackClient(fmt.Sprintf("%s%d", unauthNet, i+1), hostileUnauthConns)
		clients[i].Timeout = 30 * time.Second
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range hostileUnauthConns {
		hc := clients[w%len(clients)]
		wg.Go(func() {
			for next.Add(1) <= int64(h.cfg.HostileUnauth) && ctx.Err() == nil {
				t0 := time.Now()
				err := h.unauthorized(ctx, hc, url)
				h.unauth.Record(time.Since(t0), err)
			}
		})
	}
	wg.Wait()
}

func (h *hostileRun) unauthorized(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer not-the-token")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		h.status401.Add(1)
		return nil
	case http.StatusTooManyRequests:
		h.status429.Add(1)
		return nil
	}
	return fmt.Errorf("unauthenticated request: %s, want 401 or 429", resp.Status)
}

// slowReader yields data hostileChunk bytes at a time at rate bytes per
// second from its first Read: a client on a slow link, or one stalling on
// purpose just above the broker's minimum rate.
type slowReader struct {
	data  []byte
	off   int
	rate  float64
	start time.Time
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	if r.start.IsZero() {
		r.start = time.Now()
	}
	time.Sleep(time.Until(r.start.Add(time.Duration(float64(r.off) / r.rate * float64(time.Second)))))
	n := copy(p, r.data[r.off:min(r.off+hostileChunk, len(r.data))])
	r.off += n
	return n, nil
}

// slowWriter hashes what it is given and takes it at rate bytes per
// second from its first Write: an exec's reader that keeps up only
// slowly, so the broker must hold the command back rather than buffer.
type slowWriter struct {
	h     hash.Hash
	n     int64
	rate  float64
	start time.Time
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if w.start.IsZero() {
		w.start = time.Now()
	}
	w.n += int64(len(p))
	w.h.Write(p)
	time.Sleep(time.Until(w.start.Add(time.Duration(float64(w.n) / w.rate * float64(time.Second)))))
	return len(p), nil
}

// newLoopbackClient is an HTTP client whose connections come from src (a
// loopback address), keeping up to conns idle.
func newLoopbackClient(src string, conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	from := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	plain := &net.Dialer{Timeout: 10 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := from.DialContext(ctx, network, addr)
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return plain.DialContext(ctx, network, addr)
		}
		return c, err
	}
	return &http.Client{Transport: t}
}

// roughBytes is n bytes to one decimal in the largest binary unit below it.
func roughBytes(n float64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}
