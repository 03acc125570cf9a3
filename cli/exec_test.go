package cli

import (
	"strings"
	"testing"
)

func TestParseExecArgs(t *testing.T) {
	cases := []struct {
		args    []string
		id, cmd string
		cwd     string
	}{
		{[]string{"ws_a", "--", "echo hi | wc -c"}, "ws_a", "echo hi | wc -c", ""},
		{[]string{"ws_a", "--", "sh", "-c", "exit 3"}, "ws_a", "sh -c 'exit 3'", ""},
		{[]string{"--cwd", "sub", "ws_a", "--", "ls"}, "ws_a", "ls", "sub"},
		{[]string{"ws_a", "--cwd", "sub", "--", "ls"}, "ws_a", "ls", "sub"},
		{[]string{"ws_a", "ls", "-la"}, "ws_a", "ls -la", ""},
		{[]string{"ws_a", "--", "printf", "%s\n", "it's"}, "ws_a", `printf '%s` + "\n" + `' 'it'\''s'`, ""},
	}
	for _, tc := range cases {
		c := &CLI{Stderr: &strings.Builder{}}
		fs := c.flagSet("exec", "")
		cwd := fs.String("cwd", "", "")
		id, cmd, err := parseExecArgs(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if id != tc.id || cmd != tc.cmd || *cwd != tc.cwd {
			t.Errorf("%q: got id=%q cmd=%q cwd=%q, want %q %q %q", tc.args, id, cmd, *cwd, tc.id, tc.cmd, tc.cwd)
		}
	}
	for _, bad := range [][]string{{}, {"ws_a"}, {"ws_a", "--"}, {"a", "b", "--", "ls"}, {"--nope", "ws", "--", "ls"}} {
		c := &CLI{Stderr: &strings.Builder{}}
		fs := c.flagSet("exec", "")
		fs.String("cwd", "", "")
		if _, _, err := parseExecArgs(fs, bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
