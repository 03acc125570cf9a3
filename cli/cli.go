package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
)

// CLI is one run of the command line. Its fields are the process's
// streams and environment, so tests can run it in-process.
type CLI struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string

	// brokerURL is the broker a client subcommand tried, for its errors.
	brokerURL string
}

// New returns a CLI on the process's own streams and environment.
func New() *CLI {
	return &CLI{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// exitInterrupted is a shell's status for a command ended by SIGINT.
	exitInterrupted = 130
)

// exitError carries a specific exit status up to Run.
type exitError struct {
	code int
	err  error // nil: nothing more to print
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError reports a command line that cannot be run (exit status 2).
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

type command struct {
	name    string
	summary string
	run     func(c *CLI, ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"serve", "run the broker", (*CLI).serve},
		{"ws", wsSummary(), (*CLI).ws},
		{"tool", "run a tool in a workspace: tool <ws> <name> '<json args>'", (*CLI).tool},
		{"exec", "run a command in a workspace (-d: in the background): exec <ws> -- <command...>", (*CLI).exec},
		{"ps", "list a workspace's background processes: ps <ws>", (*CLI).ps},
		{"logs", "print a background process's output: logs [-f] <ws> <process>", (*CLI).logs},
		{"kill", "signal a background process's tree, or kill and forget it: kill [-s SIGNAL] <ws> <process>", (*CLI).kill},
		{"cp", "copy a directory tree in or out as one tar: cp <dir> <ws>:<dir> | cp <ws>:<dir> <dir>", (*CLI).cp},
		{"policy", "check a policy file and explain its rules: policy check <file>", (*CLI).policyCmd},
		{"audit", "verify an audit trail's hash chain: audit verify <file...>", (*CLI).auditCmd},
		{"token", "make a token or the hash a tenant config holds: token new | token hash [token]", (*CLI).tokenCmd},
		{"version", "print build information", (*CLI).version},
	}
}

// Run runs the command line args (without the program name) and returns
// the process's exit status.
func (c *CLI) Run(ctx context.Context, args []string) int {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	if len(args) == 0 {
		c.usage(c.Stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		c.usage(c.Stdout)
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name != name {
			continue
		}
		err := cmd.run(c, ctx, args[1:])
		return c.report(name, err)
	}
	fmt.Fprintf(c.Stderr, "broker: unknown command %q\n\n", name)
	c.usage(c.Stderr)
	return exitUsage
}

// report prints err (if there is something to print) and picks the status.
func (c *CLI) report(name string, err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if errors.Is(err, syscall.ECONNREFUSED) && c.brokerURL != "" {
		err = fmt.Errorf("no broker answers at %s (%w): start one with 'broker serve' in another shell, "+
			"or set BROKER_URL to where yours listens", c.brokerURL, syscall.ECONNREFUSED)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(c.Stderr, "broker %s: %v\n", name, ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(c.Stderr, "broker %s: %v\n", name, err)
	return exitFail
}

func (c *CLI) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: broker <command> [flags] [arguments]\n\nCommands:\n")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, "\nRun 'broker <command> -h' for a command's flags.\n"+
		"BROKER_URL (default %s) and BROKER_TOKEN select the broker; the token\n"+
		"file written by 'broker serve' is the default token.\n", defaultURL)
}

// flagSet returns a FlagSet for a subcommand whose messages parse routes:
// the usage asked for (-h, --help) goes to stdout, a flag error to stderr.
func (c *CLI) flagSet(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("broker "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{help: c.Stdout, errs: c.Stderr})
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), strings.TrimSpace("Usage: broker "+name+" "+args))
		fs.PrintDefaults()
	}
	return fs
}

// flagOutput is a FlagSet's output: errors by default, help when parse
// sees that help was asked for.
type flagOutput struct{ help, errs io.Writer }

func (o *flagOutput) Write(p []byte) (int, error) { return o.errs.Write(p) }

// parse parses args with fs; a flag error is a usage error (already
// printed by the FlagSet), -h or --help is a clean exit whose usage went
// to stdout.
func parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if fo, ok := out.(*flagOutput); ok && errors.Is(err, flag.ErrHelp) {
		out = fo.help
	}
	_, _ = out.Write(msg.Bytes())
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		return &exitError{code: exitUsage}
	}
	return nil
}

// isHelpFlag reports whether arg asks for help the way the flag package
// understands it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// subcommand is one verb of a command group such as ws or token.
type subcommand struct {
	name    string
	aliases []string
	summary string
	run     func(c *CLI, ctx context.Context, args []string) error
}

// dispatch runs the subcommand of group that args name; -h, --help or
// help prints the group's usage to stdout.
func (c *CLI) dispatch(ctx context.Context, group string, args []string, subs []subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	want := strings.Join(names, ", ")
	if len(args) == 0 {
		c.groupUsage(c.Stderr, group, subs)
		return usageError("%s needs a subcommand: %s", group, want)
	}
	if isHelpFlag(args[0]) || args[0] == "help" {
		c.groupUsage(c.Stdout, group, subs)
		return nil
	}
	for _, s := range subs {
		if s.name == args[0] || slices.Contains(s.aliases, args[0]) {
			return s.run(c, ctx, args[1:])
		}
	}
	return usageError("unknown %s subcommand %q (want %s)", group, args[0], want)
}

func (c *CLI) groupUsage(w io.Writer, group string, subs []subcommand) {
	fmt.Fprintf(w, "Usage: broker %s <subcommand> [flags] [arguments]\n\nSubcommands:\n", group)
	for _, s := range subs {
		fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, "\nRun 'broker %s <subcommand> -h' for its flags.\n", group)
}
