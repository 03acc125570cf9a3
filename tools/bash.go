package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// bashUpdateThrottle is pi's BASH_UPDATE_THROTTLE_MS: at most one
// streaming update per interval, however chatty the command.
const bashUpdateThrottle = 100 * time.Millisecond

// maxTimeoutSeconds is the largest timeout pi accepts: Node's timer limit,
// 2^31-1 ms.
const maxTimeoutSeconds = 2147483.647

// Error texts are pi's, byte for byte, hence capitalized.
var (
	errTimeoutNotFinite = errors.New("Invalid timeout: must be a finite number of seconds") //nolint:staticcheck // pi's text
	errTimeoutTooLarge  = errors.New("Invalid timeout: maximum is 2147483.647 seconds")     //nolint:staticcheck // pi's text
	errCommandAborted   = errors.New("Command aborted")                                     //nolint:staticcheck // pi's text
)

// BashDetails is the bash result's details: present only when the output
// was truncated (and in streaming updates).
type BashDetails struct {
	Truncation     *TruncationResult `json:"truncation,omitempty"`
	FullOutputPath string            `json:"fullOutputPath,omitempty"`
}

type bashTool struct {
	ops opsapi.BashOperations
	env *toolEnv
}

func newBashTool(ops opsapi.BashOperations, env *toolEnv) Tool {
	return &bashTool{ops: ops, env: env}
}

func (t *bashTool) Definition() Definition { return definitionOf("bash") }

type bashArgs struct {
	Command string          `json:"command"`
	Timeout json.RawMessage `json:"timeout"`
}

// Execute runs the command in the workspace and reports it as pi's bash
// tool does: the output's tail (2000 lines or 50 KiB), a notice naming the
// file holding the full output when it was cut, and a status line when the
// command failed, timed out or was aborted.
func (t *bashTool) Execute(ctx context.Context, raw json.RawMessage, onUpdate UpdateFunc) (Result, error) {
	var args bashArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return Result{}, err
	}
	timeout, timeoutText, err := parseTimeout(args.Timeout)
	if err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil {
		return Result{}, errCommandAborted
	}
	log := t.env.logger.With("tool", "bash")

	acc := NewOutputAccumulator(TruncationOptions{}, t.spillOpener(ctx, log), func(err error) {
		log.Warn("full output not saved", "err", err)
	})
	stream := newBashStream(acc, onUpdate)
	res, execErr := t.ops.Exec(ctx, opsapi.ExecRequest{
		Command: args.Command,
		Cwd:     t.env.cwd,
		Env:     t.env.opts.commandEnv(),
		Timeout: timeout,
		Output:  stream,
	})
	// From here on output is ignored and no update is sent; Finish waits
	// until the spill file is complete, so a later read finds it.
	snap := stream.finish()
	log.Debug("command done", "exitCode", res.ExitCode, "signal", res.Signal,
		"timedOut", res.TimedOut, "canceled", res.Canceled, "oomKilled", res.OOMKilled,
		"bytes", snap.RawBytes, "fullOutputPath", snap.FullOutputPath, "err", execErr)

	body, details := formatBashOutput(snap)
	withStatus := func(status string) string {
		if body == "" {
			return status
		}
		return body + "\n\n" + status
	}
	oomLine := ""
	if res.OOMKilled {
		oomLine = "Command was killed: out of memory" + limitText(res.MemoryLimit) + "\n"
	}

	switch {
	case execErr != nil && ctx.Err() != nil, res.Canceled:
		return Result{}, errors.New(withStatus(oomLine + "Command aborted"))
	case execErr != nil && errors.Is(execErr, opsapi.ErrNotExist):
		return Result{}, errors.New("Working directory does not exist: " + t.env.cwd + "\nCannot execute bash commands.")
	case execErr != nil:
		return Result{}, execErr
	case res.TimedOut:
		if timeoutText == "" { // the backend's own limit, not the model's
			timeoutText = formatJSNumber(math.Round(res.Duration.Seconds()*1000) / 1000)
		}
		return Result{}, errors.New(withStatus(oomLine + "Command timed out after " + timeoutText + " seconds"))
	case ctx.Err() != nil:
		return Result{}, errors.New(withStatus(oomLine + "Command aborted"))
	}

	if body == "" {
		body = "(no output)"
	}
	r := Result{Content: []Content{TextContent(body)}}
	if details != nil {
		r.Details = details
	}
	switch {
	case res.ExitCode != 0:
		r.Content[0].Text = withStatus(oomLine + "Command exited with code " + strconv.Itoa(res.ExitCode))
		r.IsError = true
	case res.OOMKilled:
		// The shell survived, but the kernel killed part of the command.
		r.Content[0].Text = withStatus(strings.TrimSuffix(oomLine, "\n"))
		r.IsError = true
	}
	return r, nil
}

// formatBashOutput is the output text with its truncation notice, and the
// details pi attaches when the output was truncated (nil otherwise).
func formatBashOutput(snap OutputSnapshot) (string, *BashDetails) {
	tr := snap.Truncation
	if !tr.Truncated {
		return tr.Content, nil
	}
	start := tr.TotalLines - tr.OutputLines + 1
	end := tr.TotalLines
	var notice string
	switch {
	case tr.LastLinePartial:
		notice = fmt.Sprintf("Showing last %s of line %d (line is %s)",
			FormatSize(tr.OutputBytes), end, FormatSize(int(snap.LastLineBytes)))
	case tr.By() == "lines":
		notice = fmt.Sprintf("Showing lines %d-%d of %d", start, end, tr.TotalLines)
	default:
		notice = fmt.Sprintf("Showing lines %d-%d of %d (%s limit)", start, end, tr.TotalLines, FormatSize(tr.MaxBytes))
	}
	if snap.FullOutputPath != "" {
		notice += ". Full output: " + snap.FullOutputPath
	} else {
		// The spill failed (or the workspace cannot be written): there is
		// no file to point to.
		notice += "."
	}
	text := tr.Content + "\n\n[" + notice + "]"
	return text, &BashDetails{Truncation: &tr, FullOutputPath: snap.FullOutputPath}
}

// spillOpener returns how the full output is saved. By default it is a
// new file of the toolbox's store on the broker's host, out of the
// workspace's tree (the output passes through the broker anyway). With
// Options.OutputDir it is a file in that workspace directory, written
// through the workspace's WriteOperations as the output arrives; it is then
// nil when the workspace cannot be written.
func (t *bashTool) spillOpener(ctx context.Context, log *slog.Logger) SpillOpener {
	if t.env.opts.OutputDir == "" {
		return t.env.spill.create
	}
	wops, ok := t.env.ws.(opsapi.WriteOperations)
	if !ok {
		log.Debug("workspace has no write operations; full output of long commands is not saved")
		return nil
	}
	dir := opsapi.Resolve(t.env.root, t.env.opts.OutputDir)
	// The file must be complete even when the call was aborted: the
	// result still points to it.
	ctx = context.WithoutCancel(ctx)
	return func() (string, io.WriteCloser, error) {
		if err := wops.Mkdir(ctx, dir); err != nil {
			return "", nil, err
		}
		var id [8]byte
		_, _ = rand.Read(id[:]) // never fails
		p := path.Join(dir, "bash-"+hex.EncodeToString(id[:])+".log")
		return p, startPipeSpill(ctx, spillStallTimeout, func(ctx context.Context, r io.Reader) error {
			return wops.WriteFile(ctx, p, r)
		}), nil
	}
}

// parseTimeout validates the model's timeout (seconds, optional) as pi
// ≥0.80.4 does, before anything runs. It returns the duration (0 for none)
// and the seconds as JavaScript would print them, for the timeout message.
func parseTimeout(raw json.RawMessage) (time.Duration, string, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return 0, "", nil
	}
	if unq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(unq) // a numeric string the schema coercion let through
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, "", errTimeoutNotFinite
	}
	if math.IsInf(v, 0) || math.IsNaN(v) || v <= 0 {
		return 0, "", errTimeoutNotFinite
	}
	if v > maxTimeoutSeconds {
		return 0, "", errTimeoutTooLarge
	}
	// Node runs a timer of less than 1 ms after 1 ms.
	d := max(time.Duration(math.Round(v*float64(time.Second))), time.Millisecond)
	return d, formatJSNumber(v), nil
}

// formatJSNumber prints v as JavaScript's Number#toString does: 1 -> "1",
// 0.5 -> "0.5", 1e-7 -> "1e-7".
func formatJSNumber(v float64) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := strconv.FormatFloat(v, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[:1]
	digits := strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}

// bashStream feeds the command's output to the accumulator and sends the
// throttled streaming updates: an empty one at once, then at most one per
// bashUpdateThrottle with the current tail, the last one trailing the
// burst that caused it. Nothing is sent once finish has been called.
type bashStream struct {
	acc      *OutputAccumulator
	onUpdate UpdateFunc

	mu     sync.Mutex
	last   time.Time
	timer  *time.Timer
	closed bool
}

func newBashStream(acc *OutputAccumulator, onUpdate UpdateFunc) *bashStream {
	s := &bashStream{acc: acc, onUpdate: onUpdate, last: time.Now()}
	if onUpdate != nil {
		onUpdate(Result{Content: []Content{}})
	}
	return s
}

func (s *bashStream) Write(p []byte) (int, error) {
	n, err := s.acc.Write(p)
	if s.onUpdate != nil && len(p) > 0 {
		s.schedule()
	}
	return n, err
}

func (s *bashStream) schedule() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.timer != nil {
		return
	}
	if wait := bashUpdateThrottle - time.Since(s.last); wait > 0 {
		s.timer = time.AfterFunc(wait, s.fire)
		return
	}
	s.emit()
}

func (s *bashStream) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if !s.closed {
		s.emit()
	}
}

// emit sends the current tail; s.mu is held so updates are serial and
// none follows finish.
func (s *bashStream) emit() {
	s.last = time.Now()
	snap := s.acc.Snapshot()
	u := Result{Content: []Content{TextContent(snap.Truncation.Content)}}
	if snap.Truncation.Truncated || snap.FullOutputPath != "" {
		d := &BashDetails{FullOutputPath: snap.FullOutputPath}
		if snap.Truncation.Truncated {
			tr := snap.Truncation
			d.Truncation = &tr
		}
		u.Details = d
	}
	s.onUpdate(u)
}

// finish stops the updates, ends the output and returns its final state.
func (s *bashStream) finish() OutputSnapshot {
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	return s.acc.Finish()
}

// limitText is " (limit 256 MiB)" for a known memory limit, "" otherwise.
func limitText(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n%(1<<30) == 0:
		return fmt.Sprintf(" (limit %d GiB)", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf(" (limit %d MiB)", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf(" (limit %.1f MiB)", float64(n)/(1<<20))
	}
	return fmt.Sprintf(" (limit %d bytes)", n)
}
