package policy_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/policy"
)

const example = `
name: example
tools:
  deny: [write]
paths:
  read:
    deny: ["**/.env", "/etc/**"]
  write:
    allow: ["src/**"]
commands:
  deny: ['\bcurl\b']
maxTimeout: 30s
env:
  allow: ["LANG", "GIT_*"]
network:
  allow: [none]
redact:
  - name: token
    pattern: 'tok_[A-Za-z0-9]{8}'
`

func mustParse(t *testing.T, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// TestDecideEveryRuleKind exercises each kind of rule both ways.
func TestDecideEveryRuleKind(t *testing.T) {
	p := mustParse(t, example)
	root := "/ws"
	cases := []struct {
		name string
		call policy.Call
		rule string // "" means allowed
	}{
		{"tool allowed", policy.Call{Tool: "read", Read: []string{"a.txt"}}, ""},
		{"tool denied", policy.Call{Tool: "write", Write: []string{"src/a"}}, "tools"},
		{"raw read needs read or edit", policy.Call{Op: "read", Read: []string{"a"}}, ""},
		{"raw mkdir needs write", policy.Call{Op: "mkdir", Write: []string{"src/x"}}, "tools"},
		{"read denied glob at depth", policy.Call{Tool: "read", Read: []string{"deep/er/.env"}}, "paths.read"},
		{"read denied glob at top", policy.Call{Tool: "read", Read: []string{".env"}}, "paths.read"},
		{"tree glob covers its directory", policy.Call{Tool: "ls", Read: []string{"/etc"}}, "paths.read"},
		{"tree glob spares a sibling", policy.Call{Tool: "ls", Read: []string{"/etcetera"}}, ""},
		{"read absolute denied", policy.Call{Tool: "read", Read: []string{"/etc/passwd"}}, "paths.read"},
		{"read dotdot into denied", policy.Call{Tool: "read", Read: []string{"src/../.env"}}, "paths.read"},
		{"write inside allow", policy.Call{Tool: "edit", Read: []string{"src/a.go"}, Write: []string{"src/a.go"}}, ""},
		{"write outside allow", policy.Call{Tool: "edit", Read: []string{"README"}, Write: []string{"README"}}, "paths.write"},
		{"write absolute into allow", policy.Call{Tool: "edit", Write: []string{"/ws/src/b"}}, ""},
		{"command allowed", policy.Call{Tool: "bash", Command: "ls -la", HasCommand: true}, ""},
		{"command denied", policy.Call{Tool: "bash", Command: "curl http://x", HasCommand: true}, "commands"},
		{"timeout over max", policy.Call{Tool: "bash", Command: "ls", HasCommand: true, Timeout: time.Minute}, "maxTimeout"},
		{"env allowed", policy.Call{Op: "exec", Command: "ls", HasCommand: true, Env: []string{"LANG", "GIT_DIR"}}, ""},
		{"env denied", policy.Call{Op: "exec", Command: "ls", HasCommand: true, Env: []string{"AWS_SECRET"}}, "env"},
		{"workspace env allowed", policy.Call{Op: "env", Env: []string{"LANG"}}, ""},
		{"workspace env denied", policy.Call{Op: "env", Env: []string{"AWS_SECRET"}}, "env"},
		{"network allowed", policy.Call{Network: "none", HasNetwork: true}, ""},
		{"network denied", policy.Call{Network: "bridge", HasNetwork: true}, "network"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.call.Root = root
			d := p.Decide(c.call)
			if (c.rule == "") != d.Allowed || d.Rule != c.rule {
				t.Fatalf("Decide = %+v, want rule %q", d, c.rule)
			}
			if !d.Allowed && !strings.HasPrefix(d.Message(), "Blocked by policy: ") {
				t.Fatalf("message %q", d.Message())
			}
		})
	}
	// A command without a timeout gets the maximum.
	if d := p.Decide(policy.Call{Tool: "bash", Command: "ls", HasCommand: true, Root: root}); d.Timeout != 30*time.Second {
		t.Fatalf("timeout %v, want the policy's 30s", d.Timeout)
	}
	// A nil policy allows all.
	var none *policy.Policy
	if !none.Decide(policy.Call{Tool: "write"}).Allowed {
		t.Fatal("nil policy denied")
	}
}

func TestParseRefusesMistakes(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":      "tool:\n  deny: [bash]\n",
		"unknown tool":     "tools:\n  deny: [rm]\n",
		"bad regexp":       "commands:\n  deny: ['(']\n",
		"empty redact":     "redact:\n  - name: x\n    pattern: 'a*'\n",
		"negative timeout": "maxTimeout: -1s\n",
		"bad glob":         "paths:\n  read:\n    deny: ['[a']\n",
	} {
		if _, err := policy.Parse([]byte(src)); err == nil {
			t.Errorf("%s: Parse accepted %q", name, src)
		}
	}
}

func TestExplainNamesEveryRule(t *testing.T) {
	p := mustParse(t, example)
	text := p.Explain()
	for _, want := range []string{"tools", "paths.read", "paths.write", "commands", "advisory", "maxTimeout", "env", "network", "redact"} {
		if !strings.Contains(text, want) {
			t.Errorf("Explain lacks %q:\n%s", want, text)
		}
	}
}

// TestStreamRedactorAcrossChunks cuts a secret at every possible point
// between two writes: it never leaves whole.
func TestStreamRedactorAcrossChunks(t *testing.T) {
	p := mustParse(t, example)
	input := "line one\nthe token is tok_AbCdEf12 ok\nlast tok_ZZZZZZZZ"
	for cut := range len(input) {
		var out bytes.Buffer
		sr := policy.NewStreamRedactor(p.Redactor(), &out)
		_, _ = sr.Write([]byte(input[:cut]))
		_, _ = sr.Write([]byte(input[cut:]))
		if err := sr.Flush(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		want := "line one\nthe token is [REDACTED:token] ok\nlast [REDACTED:token]"
		if got != want {
			t.Fatalf("cut %d: got %q, want %q", cut, got, want)
		}
	}
}

// TestStreamRedactorLongLine: a line longer than MaxHold is emitted in
// parts without letting a secret at the cut through.
func TestStreamRedactorLongLine(t *testing.T) {
	p := mustParse(t, example)
	long := strings.Repeat("x", policy.MaxHold+100) + "tok_12345678" + strings.Repeat("y", 3000)
	var out bytes.Buffer
	sr := policy.NewStreamRedactor(p.Redactor(), &out)
	for i := 0; i < len(long); i += 1000 {
		_, _ = sr.Write([]byte(long[i:min(i+1000, len(long))]))
	}
	_ = sr.Flush()
	if strings.Contains(out.String(), "tok_12345678") || !strings.Contains(out.String(), "[REDACTED:token]") {
		t.Fatal("secret in a long line not redacted")
	}
}
