package tools

import (
	"context"
	"testing"
)

func TestExpandPath(t *testing.T) {
	cases := []struct{ in, want string }{
		{"~", "/w"},
		{"~/a/b", "/w/a/b"},
		{"~x", "~x"},
		{"@src/a.go", "src/a.go"},
		{"@@a", "@a"},
		{"file\u00A0name.txt", "file name.txt"},
		{"a\u2000b\u200Ac\u202Fd\u205Fe\u3000f", "a b c d e f"},
		{"\u00A0@a", " @a"},
		{"@~/x", "/w/x"},
	}
	for _, c := range cases {
		if got := expandPath(c.in, "/w"); got != c.want {
			t.Errorf("expandPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	env := &toolEnv{root: "/w", cwd: "/w/sub"}
	cases := []struct{ in, want string }{
		{"a.txt", "/w/sub/a.txt"},
		{"../b", "/w/b"},
		{"/etc/../x", "/x"},
		{".", "/w/sub"},
		{"~/c", "/w/c"},
		{"@/abs", "/abs"},
	}
	for _, c := range cases {
		if got := env.resolve(c.in); got != c.want {
			t.Errorf("resolve(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestResolveReadProbesVariantsRemotely(t *testing.T) {
	f := newFakeWorkspace(t)
	f.addFile("Screenshot 2024-01-01 at 10.00.00\u202FAM.png", "am")
	f.addFile("Screenshot 2024-01-01 at 10.00.00\u202Fpm.png", "pm")
	f.addFile("cafe\u0301.txt", "nfd")                  // stored decomposed
	f.addFile("Capture d\u2019e\u0301cran.txt", "both") // NFD + curly
	f.addFile("it\u2019s.txt", "curly")
	f.addFile("plain.txt", "plain")
	env := &toolEnv{root: "/w", cwd: "/w"}
	ctx := context.Background()
	cases := []struct{ in, want string }{
		{"Screenshot 2024-01-01 at 10.00.00 AM.png", "/w/Screenshot 2024-01-01 at 10.00.00\u202FAM.png"},
		{"Screenshot 2024-01-01 at 10.00.00 pm.png", "/w/Screenshot 2024-01-01 at 10.00.00\u202Fpm.png"},
		{"caf\u00e9.txt", "/w/cafe\u0301.txt"},
		{"it's.txt", "/w/it\u2019s.txt"},
		{"Capture d'\u00e9cran.txt", "/w/Capture d\u2019e\u0301cran.txt"},
		{"plain.txt", "/w/plain.txt"},
		{"missing's.txt", "/w/missing's.txt"},
	}
	for _, c := range cases {
		if got, _ := env.resolveRead(ctx, f, c.in); got != c.want {
			t.Errorf("resolveRead(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
