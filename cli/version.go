package cli

import (
	"context"
	"fmt"
	"runtime/debug"
)

func (c *CLI) version(_ context.Context, args []string) error {
	fs := c.flagSet("version", "")
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, versionString())
	return nil
}

// versionString describes the binary from the build information the Go
// toolchain embeds: module version, VCS revision and time, Go version.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "broker (no build information)"
	}
	s := "broker " + bi.Main.Version
	var rev, when, dirty string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			when = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += fmt.Sprintf(" (%s%s, %s)", rev, dirty, when)
	}
	return s + " " + bi.GoVersion
}
