package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// CLI is one run of the command line. Its fields are the process's
// streams and environment, so tests can run it in-process.
type CLI struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
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
		{"ws", "create, list and remove workspaces (ws create|ls|rm)", (*CLI).ws},
		{"tool", "run a tool in a workspace: tool <ws> <name> '<json args>'", (*CLI).tool},
		{"exec", "run a command in a workspace: exec <ws> -- <command...>", (*CLI).exec},
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

// flagSet returns a FlagSet for a subcommand that reports to stderr and
// lets Run turn errors into exit statuses.
func (c *CLI) flagSet(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("broker "+name, flag.ContinueOnError)
	fs.SetOutput(c.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.Stderr, "Usage: broker %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs; a flag error is a usage error (already
// printed by the FlagSet), -h is a clean exit.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: exitUsage}
	}
	return nil
}
