package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"
)

func (c *CLI) ws(ctx context.Context, args []string) error {
	return c.dispatch(ctx, "ws", args, []subcommand{
		{"create", []string{"new"}, "create a workspace and print its id", (*CLI).wsCreate},
		{"ls", []string{"list"}, "list the workspaces", (*CLI).wsList},
		{"rm", []string{"delete"}, "remove workspaces", (*CLI).wsRemove},
	})
}

func (c *CLI) wsCreate(ctx context.Context, args []string) error {
	fs := c.flagSet("ws create", "[--backend local] [--options '<json>'] [--json]")
	cf := c.addClientFlags(fs)
	backend := fs.String("backend", "", "backend of the new workspace (default: the broker's, local)")
	options := fs.String("options", "", "the backend's creation options, as JSON")
	asJSON := fs.Bool("json", false, "print the whole workspace object as JSON instead of its id")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("ws create takes no arguments, got %q", fs.Args())
	}
	var opts json.RawMessage
	if *options != "" {
		if !json.Valid([]byte(*options)) {
			return usageError("--options is not valid JSON")
		}
		opts = json.RawMessage(*options)
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	info, err := cl.CreateWorkspace(ctx, *backend, opts)
	if err != nil {
		return explain(err)
	}
	if *asJSON {
		return c.printJSON(info)
	}
	fmt.Fprintln(c.Stdout, info.ID)
	return nil
}

func (c *CLI) wsList(ctx context.Context, args []string) error {
	fs := c.flagSet("ws ls", "[--json]")
	cf := c.addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print the list as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("ws ls takes no arguments, got %q", fs.Args())
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	list, err := cl.ListWorkspaces(ctx)
	if err != nil {
		return explain(err)
	}
	if *asJSON {
		return c.printJSON(list)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBACKEND\tCREATED\tROOT")
	for _, ws := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ws.ID, ws.Backend, ws.CreatedAt.Local().Format(time.DateTime), ws.Root)
	}
	return tw.Flush()
}

func (c *CLI) wsRemove(ctx context.Context, args []string) error {
	fs := c.flagSet("ws rm", "<id>...")
	cf := c.addClientFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError("ws rm needs at least one workspace id")
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range fs.Args() {
		if err := cl.DeleteWorkspace(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, explain(err)))
		}
	}
	return errors.Join(errs...)
}

func (c *CLI) printJSON(v any) error {
	enc := json.NewEncoder(c.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
