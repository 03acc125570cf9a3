package policy

import "testing"

// TestGlobDialect pins what docs/policy.md promises of a path glob, in
// doublestar's dialect plus the one rewrite (a "**" inside a segment).
func TestGlobDialect(t *testing.T) {
	cases := []struct {
		glob, name string
		want       bool
	}{
		{"**/.env", ".env", true}, // "**/" also matches nothing
		{"**/.env", "deep/er/.env", true},
		{"**/.env", "a.env", false},
		{"*.pem", "key.pem", true},
		{"*.pem", "keys/key.pem", false}, // '*' stays in one segment
		{"?.go", "a.go", true},
		{"?.go", "/.go", false},
		{"secrets/**", "secrets", true}, // a trailing "/**" covers the directory
		{"secrets/**", "secrets/a/b", true},
		{"secrets/**", "secretsx", false},
		{"/etc/**", "/etc", true},
		{"/etc/**", "/etcetera", false},
		{"/etc/shadow", "/etc/shadow", true},
		{"src/**/test", "src/test", true},
		{"src/**/test", "src/a/b/test", true},
		{".", ".", true},
		{"**", ".", true},
		{"**", "a/b/c", true},
		{"[a-c].txt", "b.txt", true},
		{"[!a-c].txt", "b.txt", false},
		{`\*.txt`, "*.txt", true},
		{`\*.txt`, "a.txt", false},
		{"GIT_*", "GIT_DIR", true},
		{"GIT_*", "LANG", false},
		// "**" inside a segment still crosses segments (docs/policy.md).
		{"**.pem", "a/b/key.pem", true},
		{"**.pem", "key.pem", true},
		{"src**", "src/a/b", true},
		{"src**", "src", true},
		{"src**", "lib/src", false},
		{"a/**b", "a/x/y/b", true},
		{"a/**b", "a/b", true},
		{"x**y**z", "x/1/y/2/z", true},
		{`[*][*]x`, "**x", true}, // stars in a class are literal
		{`\*\*x`, "**x", true},
		// doublestar's alternation.
		{"{src,tests}/**", "tests/a", true},
		{"{src,tests}/**", "docs/a", false},
		{`\{a,b\}`, "{a,b}", true}, // escaped braces are literal
	}
	for _, c := range cases {
		match, err := compileGlob(c.glob)
		if err != nil {
			t.Errorf("compileGlob(%q): %v", c.glob, err)
			continue
		}
		if got := match(c.name); got != c.want {
			t.Errorf("glob %q on %q = %v, want %v (rewritten %q)", c.glob, c.name, got, c.want, starsAcrossSegments(c.glob))
		}
	}
	for _, bad := range []string{"", "[a", "{a,b"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) accepted a bad glob", bad)
		}
	}
}
