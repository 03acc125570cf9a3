package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFuzzyNormalizeSteps(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"nfkc full-width", "ＡＢＣ１２３", "ABC123"},
		{"nfkc composes", "cafe\u0301", "caf\u00e9"},
		{"nfkc compatibility", "\uFB01le", "file"}, // the "fi" ligature
		{"trailing whitespace per line", "a  \nb\t\n c \u3000\n", "a\nb\n c\n"},
		{"leading whitespace kept", "  x", "  x"},
		{"trailing U+FEFF trimmed as JS does", "x\uFEFF", "x"},
		{"U+0085 not trimmed (not JS whitespace)", "x\u0085", "x\u0085"},
		{"single quotes", "\u2018a\u2019 \u201Ab\u201B", "'a' 'b'"},
		{"double quotes", "\u201Ca\u201D \u201Eb\u201F", `"a" "b"`},
		{"dashes", "a\u2010b\u2011c\u2012d\u2013e\u2014f\u2015g\u2212h", "a-b-c-d-e-f-g-h"},
		{"spaces", "a\u00A0b\u2002c\u2009d\u202Fe\u205Ff\u3000g", "a b c d e f g"},
		{"lines kept", "a\n\n\nb\n", "a\n\n\nb\n"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
	}
	for _, c := range cases {
		if got := normalizeForFuzzyMatch(c.in); got != c.want {
			t.Errorf("%s: normalize(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestFuzzyNormalizeKeepsLineCount(t *testing.T) {
	for _, s := range []string{"a\u2028b\nc", "x\r\ny\n", "\u0085\n\u000b\n", "ｘ\n\u3000\n"} {
		if got := normalizeForFuzzyMatch(s); strings.Count(got, "\n") != strings.Count(s, "\n") {
			t.Errorf("normalize(%q) = %q changes the number of newlines", s, got)
		}
	}
}

func TestFuzzyFind(t *testing.T) {
	content := "say \u201Chi\u201D  \nsay \"hi\"\n"
	fz := normalizeForFuzzyMatch(content)

	// Exact first, even where a fuzzy match exists earlier.
	m, ok := fuzzyFind(content, fz, `say "hi"`)
	if !ok || m.fuzzy || m.index != strings.Index(content, `say "hi"`) {
		t.Errorf("exact: got %+v %v", m, ok)
	}
	m, ok = fuzzyFind(content, fz, "say \u201Chi\u201D \n")
	if !ok || !m.fuzzy || m.index != 0 || m.length != len(`say "hi"`+"\n") {
		t.Errorf("fuzzy: got %+v %v", m, ok)
	}
	if _, ok := fuzzyFind(content, fz, "absent"); ok {
		t.Error("found absent text")
	}
	// Whitespace that is not in the file is not "found" at offset 0.
	if _, ok := fuzzyFind("abc", "abc", "   "); ok {
		t.Error("whitespace-only needle found")
	}
	if n := countFuzzyOccurrences(content, fz, `say "hi"`); n != 2 {
		t.Errorf("occurrences = %d, want 2 (counted in fuzzy space)", n)
	}
	if n := countFuzzyOccurrences("a  b  c", "a  b  c", "  "); n != 2 {
		t.Errorf("whitespace occurrences = %d, want 2", n)
	}
}

// FuzzFuzzyNormalize: normalization never panics, returns valid UTF-8,
// keeps the number of lines and is idempotent (the edit tool relies on
// normalize(normalize(x)) == normalize(x) when it matches in fuzzy space).
func FuzzFuzzyNormalize(f *testing.F) {
	for _, s := range []string{
		"", "plain\n", "line one   \nline two  \n", "ＡＢＣ１２３", "cafe\u0301",
		"\u201Cq\u201D \u2018s\u2019 \u2013 \u2014 \u00A0", "a\xff\xfe\n", "\u3000\n\u2028",
		strings.Repeat("\u0301", 40), "x\uFEFF\n\u0085",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := normalizeForFuzzyMatch(s)
		if !utf8.ValidString(got) {
			t.Fatalf("normalize(%q) = %q is not valid UTF-8", s, got)
		}
		if strings.Count(got, "\n") != strings.Count(s, "\n") {
			t.Fatalf("normalize(%q) = %q changed the line count", s, got)
		}
		if isFuzzyNormal(s) != (got == s) {
			t.Fatalf("isFuzzyNormal(%q) = %v, but normalize gives %q", s, isFuzzyNormal(s), got)
		}
		if again := normalizeForFuzzyMatch(got); again != got {
			t.Fatalf("not idempotent: normalize(%q) = %q, normalize of that = %q", s, got, again)
		}
	})
}
