package tools

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// fuzzyPunctuation folds the typographic characters models rarely
// reproduce exactly (pi's normalizeForFuzzyMatch steps 3 to 6): smart
// single quotes, smart double quotes, dashes and Unicode spaces.
var fuzzyPunctuation = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200A", " ",
	"\u202F", " ", "\u205F", " ", "\u3000", " ",
)

// normalizeForFuzzyMatch is pi's normalizeForFuzzyMatch: NFKC, then every
// line's trailing whitespace removed, then the punctuation folds. It never
// changes the number of '\n' in s, so line numbers agree between a text and
// its fuzzy view.
//
// Invalid UTF-8 becomes U+FFFD first, as it does when pi decodes a file, so
// the result is always valid UTF-8 and the function is idempotent.
func normalizeForFuzzyMatch(s string) string {
	if isFuzzyNormal(s) {
		return s // the common case for source files: no copies of a big file
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = norm.NFKC.String(s)
	if strings.IndexFunc(s, isJSSpace) >= 0 {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRightFunc(l, isJSSpace)
		}
		s = strings.Join(lines, "\n")
	}
	return fuzzyPunctuation.Replace(s)
}

// isFuzzyNormal reports whether normalizeForFuzzyMatch(s) == s, without
// building the normalized copy.
func isFuzzyNormal(s string) bool {
	if !utf8.ValidString(s) || !norm.NFKC.IsNormalString(s) {
		return false
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case r == '\n' && prev != '\n' && isJSSpace(prev): // trailing space on a line
			return false
		case r >= 0x80 && isFuzzyPunctuation(r):
			return false
		}
		prev = r
	}
	return prev == '\n' || !isJSSpace(prev)
}

// isFuzzyPunctuation reports whether fuzzyPunctuation replaces r.
func isFuzzyPunctuation(r rune) bool {
	switch r {
	case '\u2018', '\u2019', '\u201A', '\u201B', '\u201C', '\u201D', '\u201E', '\u201F',
		'\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212',
		'\u00A0', '\u202F', '\u205F', '\u3000':
		return true
	}
	return r >= '\u2002' && r <= '\u200A'
}

// isJSSpace reports whether JavaScript's String.prototype.trimEnd removes
// r (WhiteSpace and LineTerminator). It differs from unicode.IsSpace: it
// includes U+FEFF and excludes U+0085.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00A0', '\u1680',
		'\u2028', '\u2029', '\u202F', '\u205F', '\u3000', '\uFEFF':
		return true
	}
	return r >= '\u2000' && r <= '\u200A'
}

// fuzzyMatch is where one oldText was found in a base text.
type fuzzyMatch struct {
	index, length int
	fuzzy         bool // found only after normalization
}

// fuzzyFind is pi's fuzzyFindText: an exact search in content first, then a
// search for the normalized needle in the normalized content (fuzzyContent
// must be normalizeForFuzzyMatch(content)). A needle that normalizes to
// nothing (only whitespace) is not looked for fuzzily: pi would "find" it
// at offset 0 and insert there, which no model means.
func fuzzyFind(content, fuzzyContent, needle string) (fuzzyMatch, bool) {
	if i := strings.Index(content, needle); i >= 0 {
		return fuzzyMatch{index: i, length: len(needle)}, true
	}
	fn := normalizeForFuzzyMatch(needle)
	if fn == "" {
		return fuzzyMatch{}, false
	}
	if i := strings.Index(fuzzyContent, fn); i >= 0 {
		return fuzzyMatch{index: i, length: len(fn), fuzzy: true}, true
	}
	return fuzzyMatch{}, false
}

// countFuzzyOccurrences counts the non-overlapping occurrences of needle in
// fuzzy space, as pi's countOccurrences does for exact matches too, so that
// text differing only in whitespace or quotes is reported as ambiguous. A
// needle that normalizes to nothing is counted exactly in content instead
// (pi would count characters there).
func countFuzzyOccurrences(content, fuzzyContent, needle string) int {
	fn := normalizeForFuzzyMatch(needle)
	if fn == "" {
		return strings.Count(content, needle)
	}
	return strings.Count(fuzzyContent, fn)
}
