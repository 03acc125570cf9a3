package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// envList collects repeated -env K=V flags.
type envList []string

func (e *envList) String() string { return strings.Join(*e, ",") }
func (e *envList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

func (c *CLI) exec(ctx context.Context, args []string) error {
	fs := c.flagSet("exec", "[flags] <ws> -- <command...>")
	cf := c.addClientFlags(fs)
	cwd := fs.String("cwd", "", "working directory in the workspace (default: its root)")
	timeout := fs.Duration("timeout", 0, "kill the command after this long (0: no limit)")
	detach := fs.Bool("d", false, "start the command in the background and print its process id (see ps, logs, kill)")
	tag := fs.String("tag", "", "with -d: a label for the process, shown by ps")
	keepStdin := fs.Bool("i", false, "with -d: keep the process's stdin open for writing")
	tty := fs.Bool("t", false, "run the command on a terminal (an interactive shell: exec -t <ws> -- bash); Ctrl-C goes to it. Needs a terminal on stdin: without one -t is ignored, and says so")
	var env envList
	fs.Var(&env, "env", "KEY=VALUE added to the command's environment (repeatable)")

	id, command, err := parseExecArgs(fs, args)
	if err != nil {
		return err
	}
	if *timeout < 0 {
		return usageError("--timeout must not be negative")
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	if *detach {
		p, err := cl.Workspace(id).StartProcess(ctx, wire.StartProcessRequest{Tag: *tag, Stdin: *keepStdin,
			ExecRequest: wire.ExecRequest{Command: command, Cwd: *cwd, Env: env, Timeout: timeout.Seconds()}})
		if err != nil {
			return explain(err)
		}
		fmt.Fprintln(c.Stdout, p.ID)
		return nil
	}
	// Ctrl-C cancels the request; the broker then kills the remote tree.
	// On a terminal in raw mode it is a byte typed at the remote one.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	req := opsapi.ExecRequest{Command: command, Cwd: *cwd, Env: env, Timeout: *timeout, Output: c.Stdout}
	if *tty && !c.stdinIsTerminal() {
		// As ssh -t does: a remote terminal fed from a pipe never sees
		// the end of its input (a terminal has none), so an interactive
		// shell would wait for ever after the last line.
		fmt.Fprintln(c.Stderr, "broker exec: stdin is not a terminal, so the command runs without one (-t ignored)")
		*tty = false
	}
	if !*tty {
		req.Stdin = c.commandStdin() // a terminal takes the CLI's stdin as it is
	} else {
		restore, err := c.terminal(ctx, &req)
		if err != nil {
			return err
		}
		defer restore()
	}
	res, err := cl.Workspace(id).Exec(ctx, req)
	if ctx.Err() != nil {
		fmt.Fprintln(c.Stderr, "broker exec: interrupted; the command was killed")
		return &exitError{code: exitInterrupted}
	}
	if err != nil {
		return explain(err)
	}
	switch {
	case res.Canceled:
		// Not us: the broker ended it (shutdown, workspace deleted).
		fmt.Fprintln(c.Stderr, "broker exec: the broker stopped the command")
		if res.ExitCode == 0 {
			return &exitError{code: exitFail}
		}
	case res.TimedOut:
		fmt.Fprintf(c.Stderr, "broker exec: command timed out after %s and was killed\n", *timeout)
	case res.OOMKilled:
		if res.MemoryLimit > 0 {
			fmt.Fprintf(c.Stderr, "broker exec: the command ran out of memory (limit %d MiB) and was killed\n", res.MemoryLimit>>20)
		} else {
			fmt.Fprintln(c.Stderr, "broker exec: the command ran out of memory and was killed")
		}
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode}
	}
	return nil
}

// commandStdin is what exec passes as the command's stdin: the CLI's own,
// unless it is a terminal or a device such as /dev/null (a terminal
// would make the command wait for typing that nobody sees echoed), or it
// ends before its first byte (a script's empty pipe): then none, which
// every backend takes, the fallback without the in-box agent included.
func (c *CLI) commandStdin() io.Reader {
	if f, ok := c.Stdin.(*os.File); ok {
		if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice != 0 {
			return nil
		}
	}
	br := bufio.NewReader(c.Stdin)
	if _, err := br.Peek(1); err != nil {
		return nil
	}
	return br
}

// parseExecArgs splits `[flags] <ws> [flags] -- <command...>`, or without
// "--", `[flags] <ws> <command...>` where everything after the id belongs
// to the command. A single command word is a shell command line used as
// it is (`broker exec ws -- 'ls | wc -l'`); several words are quoted for
// the shell one by one, so `broker exec ws -- sh -c 'exit 3'` runs what it
// says.
func parseExecArgs(fs *flag.FlagSet, args []string) (id, command string, err error) {
	var words []string
	if i := slices.Index(args, "--"); i >= 0 {
		words = args[i+1:]
		var positional []string
		rest := args[:i]
		for {
			if err := parse(fs, rest); err != nil {
				return "", "", err
			}
			if fs.NArg() == 0 {
				break
			}
			positional = append(positional, fs.Arg(0))
			rest = fs.Args()[1:]
		}
		if len(positional) != 1 {
			return "", "", usageError("exec needs exactly one workspace id before --, got %q", positional)
		}
		id = positional[0]
	} else {
		if err := parse(fs, args); err != nil {
			return "", "", err
		}
		if fs.NArg() == 0 {
			return "", "", usageError("usage: broker exec [flags] <ws> -- <command...>")
		}
		id, words = fs.Arg(0), fs.Args()[1:]
	}
	switch len(words) {
	case 0:
		return "", "", usageError("exec needs a command after the workspace id")
	case 1:
		return id, words[0], nil
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	return id, strings.Join(quoted, " "), nil
}

// shellQuote quotes s for bash unless it is made only of safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
