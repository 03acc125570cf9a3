package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/wsbroker/wsbroker/client"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// ps lists a workspace's background processes.
func (c *CLI) ps(ctx context.Context, args []string) error {
	fs := c.flagSet("ps", "[flags] <ws>")
	cf := c.addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print the list as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("ps takes one workspace id, got %q", fs.Args())
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	list, err := cl.Workspace(fs.Arg(0)).BackgroundProcesses(ctx)
	if err != nil {
		return explain(err)
	}
	if *asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTAG\tSTARTED\tCPU\tMEM\tOUTPUT\tCOMMAND")
	for _, p := range list {
		cpu, mem := "-", "-"
		if u := p.Usage; u != nil {
			cpu = time.Duration(u.CPUNs).Round(10 * time.Millisecond).String()
			mem = fmt.Sprintf("%.1fM", float64(u.MemoryBytes)/(1<<20))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.ID, stateOf(p), p.Tag,
			p.StartedAt.Local().Format(time.DateTime), cpu, mem, p.Output.Written, oneLine(p.Command, 60))
	}
	return tw.Flush()
}

// stateOf is a process's state as ps shows it: with the exit status once
// it has ended.
func stateOf(p wire.BackgroundProcess) string {
	switch {
	case p.State == wire.ProcessExited && p.Result != nil && p.Result.Signal != "":
		return fmt.Sprintf("exited(%d, %s)", p.Result.ExitCode, p.Result.Signal)
	case p.State == wire.ProcessExited && p.Result != nil:
		return fmt.Sprintf("exited(%d)", p.Result.ExitCode)
	}
	return p.State
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// logs prints a background process's output from -offset on; with -f it
// follows until the process ends, resuming where it was when the
// connection breaks, and exits with the process's status.
func (c *CLI) logs(ctx context.Context, args []string) error {
	fs := c.flagSet("logs", "[flags] <ws> <process>")
	cf := c.addClientFlags(fs)
	follow := fs.Bool("f", false, "follow the output until the process ends")
	offset := fs.Int64("offset", 0, "byte offset to start from")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("logs takes a workspace id and a process id, got %q", fs.Args())
	}
	if *offset < 0 {
		return usageError("--offset must not be negative")
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	last, err := c.followLogs(ctx, cl.Workspace(fs.Arg(0)), fs.Arg(1), *offset, *follow)
	if ctx.Err() != nil {
		return nil // Ctrl-C ends the reading, not the process
	}
	if err != nil {
		return explain(err)
	}
	if last.Type == wire.LineExit && last.Result != nil && last.Result.ExitCode != 0 {
		return &exitError{code: last.Result.ExitCode}
	}
	return nil
}

// followLogs copies the log to stdout, reconnecting from the offset it
// reached when the connection breaks while following.
func (c *CLI) followLogs(ctx context.Context, ws *client.Workspace, id string, off int64, follow bool) (wire.LogLine, error) {
	for retries := 0; ; retries++ {
		last, err := ws.ProcessLogs(ctx, id, off, follow, func(l wire.LogLine) error {
			if l.Type == wire.LineDropped {
				fmt.Fprintf(c.Stderr, "broker logs: bytes %d to %d were dropped from the log (it keeps the newest)\n", l.Offset, l.Next)
				off = l.Next
				return nil
			}
			if _, err := c.Stdout.Write(l.Data); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			off = l.Offset + int64(len(l.Data))
			return nil
		})
		if err == nil || !follow || !errors.Is(err, opsapi.ErrUnavailable) || retries >= 5 {
			return last, err
		}
		fmt.Fprintf(c.Stderr, "broker logs: connection lost (%v); resuming at byte %d\n", err, off)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// kill sends a signal to a background process's tree (-s), or kills its
// tree, forgets it and deletes its log.
func (c *CLI) kill(ctx context.Context, args []string) error {
	fs := c.flagSet("kill", "[flags] <ws> <process>")
	cf := c.addClientFlags(fs)
	sig := fs.String("s", "", "send this signal (SIGINT, SIGTERM, SIGKILL, SIGHUP, ...) instead of removing the process")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("kill takes a workspace id and a process id, got %q", fs.Args())
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	ws := cl.Workspace(fs.Arg(0))
	if *sig != "" {
		name := strings.ToUpper(*sig)
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		return explain(ws.SignalProcess(ctx, fs.Arg(1), name))
	}
	p, err := ws.RemoveProcess(ctx, fs.Arg(1))
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(c.Stderr, "broker kill: %s %s\n", p.ID, stateOf(p))
	return nil
}
