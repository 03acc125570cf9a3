package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wsbroker/wsbroker/wire"
)

func (c *CLI) ws(ctx context.Context, args []string) error {
	return c.dispatch(ctx, "ws", args, wsSubcommands())
}

func wsSubcommands() []subcommand {
	return []subcommand{
		{"create", []string{"new"}, "create a workspace and print its id", (*CLI).wsCreate},
		{"ls", []string{"list"}, "list the workspaces", (*CLI).wsList},
		{"rm", []string{"delete"}, "remove workspaces", (*CLI).wsRemove},
		{"env", nil, "replace a workspace's environment: env <ws> [--env K=V]... [--secret-env K=V]...", (*CLI).wsEnv},
	}
}

// wsSummary is the ws line of broker -h, listing every subcommand so
// that the list cannot fall behind them.
func wsSummary() string {
	var names []string
	for _, s := range wsSubcommands() {
		names = append(names, s.name)
	}
	return "create, list and remove workspaces, replace their environment (ws " + strings.Join(names, "|") + ")"
}

func (c *CLI) wsCreate(ctx context.Context, args []string) error {
	fs := c.flagSet("ws create", "[--backend local] [--options '<json>' | --profile NAME] [--json]")
	cf := c.addClientFlags(fs)
	backend := fs.String("backend", "", "backend of the new workspace (default: the broker's default backend: docker when it serves docker, else local)")
	options := fs.String("options", "", "the backend's creation options, as JSON")
	profile := fs.String("profile", "", "a workspace spec configured on the broker (its profiles:), instead of --backend and --options")
	asJSON := fs.Bool("json", false, "print the whole workspace object as JSON instead of its id")
	var env, secrets envList
	fs.Var(&env, "env", "KEY=VALUE in the workspace's environment, seen by every command (repeatable)")
	fs.Var(&secrets, "secret-env", "KEY=VALUE as --env, its value redacted from every output (repeatable)")
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
	info, err := cl.Create(ctx, wire.CreateRequest{Profile: *profile, Backend: *backend, Options: opts, Env: envVars(env, secrets)})
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

// envVars are the --env and --secret-env pairs as variables.
func envVars(env, secrets envList) []wire.EnvVar {
	var out []wire.EnvVar
	for i, list := range []envList{env, secrets} {
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			out = append(out, wire.EnvVar{Name: k, Value: v, Secret: i == 1})
		}
	}
	return out
}

// wsEnv replaces a workspace's environment with the flags' variables
// (none: it is removed).
func (c *CLI) wsEnv(ctx context.Context, args []string) error {
	fs := c.flagSet("ws env", "<ws> [--env K=V]... [--secret-env K=V]...")
	cf := c.addClientFlags(fs)
	var env, secrets envList
	fs.Var(&env, "env", "KEY=VALUE seen by every command (repeatable)")
	fs.Var(&secrets, "secret-env", "KEY=VALUE as --env, its value redacted from every output (repeatable)")
	id, err := parseOneID(fs, args, "ws env")
	if err != nil {
		return err
	}
	cl, err := c.client(cf)
	if err != nil {
		return err
	}
	info, err := cl.Workspace(id).SetEnv(ctx, envVars(env, secrets))
	if err != nil {
		return explain(err)
	}
	for _, v := range info.Env {
		fmt.Fprintln(c.Stdout, v.Name)
	}
	return nil
}

// parseOneID parses flags around exactly one workspace id.
func parseOneID(fs *flag.FlagSet, args []string, name string) (string, error) {
	var ids []string
	for {
		if err := parse(fs, args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		ids = append(ids, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(ids) != 1 {
		return "", usageError("%s takes one workspace id, got %q", name, ids)
	}
	return ids[0], nil
}
