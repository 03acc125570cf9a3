package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wsbroker/wsbroker/tools"
)

func (c *CLI) tool(ctx context.Context, args []string) error {
	fs := c.flagSet("tool", "<ws> <name> ['<json args>' | -]")
	cf := c.addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print the whole result as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 || fs.NArg() > 3 {
		return usageError("usage: broker tool <ws> <name> ['<json args>' | -]")
	}
	id, name := fs.Arg(0), fs.Arg(1)
	raw := "{}"
	switch {
	case fs.Arg(2) == "-":
		b, err := io.ReadAll(c.Stdin)
		if err != nil {
			return fmt.Errorf("reading arguments from stdin: %w", err)
		}
		raw = string(b)
	case fs.NArg() == 3:
		raw = fs.Arg(2)
	}
	if !json.Valid([]byte(raw)) {
		return usageError("tool arguments are not valid JSON: %s", raw)
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := cl.Workspace(id).CallTool(ctx, name, json.RawMessage(raw), nil)
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: exitInterrupted}
		}
		return explain(err)
	}
	if *asJSON {
		if err := c.printJSON(res); err != nil {
			return err
		}
	} else {
		out := c.Stdout
		if res.IsError {
			out = c.Stderr
		}
		printContent(out, res.Content)
	}
	switch {
	case ctx.Err() != nil:
		// Interrupted: the broker stopped the tool and sent its result
		// ("Command aborted" for bash), printed above.
		return &exitError{code: exitInterrupted}
	case res.IsError:
		return &exitError{code: exitFail}
	}
	return nil
}

// printContent writes a result's text blocks, each ending in a newline; an
// image is shown as a one-line placeholder.
func printContent(w io.Writer, content []tools.Content) {
	for _, b := range content {
		switch b.Type {
		case "text":
			_, _ = io.WriteString(w, b.Text)
			if !strings.HasSuffix(b.Text, "\n") {
				_, _ = io.WriteString(w, "\n")
			}
		case "image":
			fmt.Fprintf(w, "[image %s, %d bytes]\n", b.MimeType, base64.StdEncoding.DecodedLen(len(b.Data)))
		default:
			fmt.Fprintf(w, "[%s content]\n", b.Type)
		}
	}
}
