package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestEveryVerbAnswersHelp runs every command, and every subcommand a
// group's usage lists, with -h and --help: usage on stdout, exit 0,
// nothing on stderr, and nothing done (token hash must not hash "-h").
func TestEveryVerbAnswersHelp(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	var verbs [][]string
	for _, cmd := range commands() {
		verbs = append(verbs, []string{cmd.name})
		out, _, _ := run(env, "", cmd.name, "-h")
		verbs = append(verbs, subcommandsListed(out, cmd.name)...)
	}
	for _, want := range [][]string{{"ws", "create"}, {"ws", "ls"}, {"ws", "rm"}, {"policy", "check"}, {"audit", "verify"}, {"token", "new"}, {"token", "hash"}} {
		if !containsVerb(verbs, want) {
			t.Errorf("%q is not listed by its group's usage", want)
		}
	}
	for _, verb := range verbs {
		for _, help := range []string{"-h", "--help"} {
			args := append(append([]string{}, verb...), help)
			out, errs, code := run(env, "", args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, "Usage: broker "+strings.Join(verb, " ")) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
			}
		}
	}
}

// subcommandsListed reads the subcommand names from a group's usage.
func subcommandsListed(usage, group string) [][]string {
	_, list, ok := strings.Cut(usage, "Subcommands:\n")
	if !ok {
		return nil
	}
	var verbs [][]string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		verbs = append(verbs, []string{group, strings.Fields(line)[0]})
	}
	return verbs
}

func containsVerb(verbs [][]string, want []string) bool {
	for _, v := range verbs {
		if strings.Join(v, " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}

// TestTopUsageNamesEverySubcommand: broker -h's line for a group names
// every subcommand the group's own usage lists (it once left out ws env).
func TestTopUsageNamesEverySubcommand(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	top, _, _ := run(env, "", "-h")
	lines := map[string]string{}
	for _, line := range strings.Split(top, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(line, "  ") {
			lines[f[0]] = line
		}
	}
	for _, cmd := range commands() {
		out, _, _ := run(env, "", cmd.name, "-h")
		for _, verb := range subcommandsListed(out, cmd.name) {
			if !regexp.MustCompile(`\b` + verb[1] + `\b`).MatchString(strings.TrimPrefix(lines[cmd.name], "  "+cmd.name)) {
				t.Errorf("broker -h does not name %q: %q", strings.Join(verb, " "), lines[cmd.name])
			}
		}
	}
}

// TestGroupsNeedASubcommand: a group without a known subcommand is a
// usage error that shows the group's usage.
func TestGroupsNeedASubcommand(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	for _, args := range [][]string{{"ws"}, {"policy"}, {"audit"}, {"token"}, {"token", "frob"}, {"policy", "check"}, {"audit", "verify"}, {"token", "new", "x"}, {"token", "hash", "a", "b"}} {
		_, errs, code := run(env, "", args...)
		if code != 2 || !strings.Contains(errs, "broker "+args[0]) {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestTokenHashTakesADashToken: a base64url token may begin with '-';
// only -h and --help ask for help.
func TestTokenHashTakesADashToken(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	out, errs, code := run(env, "", "token", "hash", "-abc")
	if code != 0 || !strings.HasPrefix(out, "sha256:") {
		t.Fatalf("token hash -abc: %d %q %q", code, out, errs)
	}
	if in, _, _ := run(env, "-abc\n", "token", "hash"); in != out {
		t.Fatalf("argument and stdin hash differently: %q %q", out, in)
	}
}
