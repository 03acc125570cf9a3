package local

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
)

// rgLine renders one ripgrep JSON message.
func rgLine(typ, path string, line int, text string) string {
	return fmt.Sprintf(`{"type":%q,"data":{"path":{"text":%q},"lines":{"text":%q},"line_number":%d,"absolute_offset":0,"submatches":[{"match":{"text":"x"},"start":0,"end":1}]}}`+"\n",
		typ, path, text+"\n", line)
}

func TestCollectLimitAndContext(t *testing.T) {
	// Two files, context 1: a.txt matches on 2 and 5, b.txt on 2.
	stream := `{"type":"begin","data":{"path":{"text":"./a.txt"}}}` + "\n" +
		rgLine("context", "./a.txt", 1, "a1") +
		rgLine("match", "./a.txt", 2, "a2") +
		rgLine("context", "./a.txt", 3, "a3") +
		rgLine("context", "./a.txt", 4, "a4") +
		rgLine("match", "./a.txt", 5, "a5") +
		rgLine("context", "./a.txt", 6, "a6") +
		`{"type":"end","data":{"path":{"text":"./a.txt"},"binary_offset":null,"stats":{}}}` + "\n" +
		rgLine("context", "./b.txt", 1, "b1") +
		rgLine("match", "./b.txt", 2, "b2") +
		`{"type":"summary","data":{"elapsed_total":{"human":"0s"},"stats":{"matches":3}}}` + "\n"
	render := func(ls []opsapi.SearchLine) string {
		var b strings.Builder
		for _, l := range ls {
			sep := "-"
			if l.Match {
				sep = ":"
			}
			fmt.Fprintf(&b, "%s%s%d%s%s ", l.Path, sep, l.Line, sep, l.Text)
		}
		return strings.TrimSpace(b.String())
	}
	for _, tc := range []struct {
		limit   int
		want    string
		reached bool
	}{
		// The 2nd match's leading context (a4) is not kept, a3 is the
		// 1st match's trailing context.
		{1, "a.txt-1-a1 a.txt:2:a2 a.txt-3-a3", true},
		{2, "a.txt-1-a1 a.txt:2:a2 a.txt-3-a3 a.txt-4-a4 a.txt:5:a5 a.txt-6-a6", true},
		{3, "a.txt-1-a1 a.txt:2:a2 a.txt-3-a3 a.txt-4-a4 a.txt:5:a5 a.txt-6-a6 b.txt-1-b1 b.txt:2:b2", false},
	} {
		res, stopped, err := collect(strings.NewReader(stream), tc.limit, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := render(res.Lines); got != tc.want || res.LimitReached != tc.reached || stopped != tc.reached {
			t.Errorf("limit %d:\n got %s (reached %v)\nwant %s (reached %v)", tc.limit, got, res.LimitReached, tc.want, tc.reached)
		}
	}
	// A single-file search names every line by the file's base name.
	res, _, _ := collect(strings.NewReader(rgLine("match", "<stdin>", 7, "x")), 10, 0, "f.go")
	if len(res.Lines) != 1 || res.Lines[0].Path != "f.go" || res.Lines[0].Line != 7 {
		t.Errorf("file search: %+v", res.Lines)
	}
}

func TestCollectDecoding(t *testing.T) {
	bad := base64.StdEncoding.EncodeToString([]byte("caf\xe9 \xff\r\n"))
	path := base64.StdEncoding.EncodeToString([]byte("./d\xffir/f"))
	stream := `{"type":"match","data":{"path":{"bytes":"` + path + `"},"lines":{"bytes":"` + bad + `"},"line_number":3}}` + "\n" +
		`{"type":"match","data":{"path":{"text":"./u.txt"},"lines":{"text":"\u00e9\ud83d\ude00 \"q\" \\ \/\t\r\n"},"line_number":4}}` + "\n"
	res, _, err := collect(strings.NewReader(stream), 10, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Lines) != 2 {
		t.Fatalf("lines %+v", res.Lines)
	}
	if l := res.Lines[0]; l.Path != "d\uFFFDir/f" || l.Text != "caf\uFFFD \uFFFD" {
		t.Errorf("bytes decoding: %+v", l)
	}
	if l := res.Lines[1]; l.Text != "é😀 \"q\" \\ /\t" {
		t.Errorf("escapes: %q", l.Text)
	}
}

func TestCollectCapsHugeLines(t *testing.T) {
	huge := strings.Repeat("é", 3<<20) // 6 MiB of 2-byte runes
	stream := rgLine("match", "./big", 1, huge) +
		`{"type":"match","data":{"path":{"bytes":"` + base64.StdEncoding.EncodeToString([]byte("./bin")) +
		`"},"lines":{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xff", 1<<20))) + `"},"line_number":2}}` + "\n"
	res, _, err := collect(strings.NewReader(stream), 10, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Lines {
		if len(l.Text) > maxLineBytes+3 || len(l.Text) < maxLineBytes/2 {
			t.Errorf("%s: text of %d bytes, want about %d", l.Path, len(l.Text), maxLineBytes)
		}
		if !strings.HasPrefix(l.Text, huge[:100]) && l.Path == "big" {
			t.Errorf("big: text %q...", l.Text[:10])
		}
	}
}

func TestCollectMalformed(t *testing.T) {
	for _, s := range []string{`{"type":"match","data":{`, `{"type":}`, `[1,2`, `{"type":"match","data":{"line_number":1x}}`} {
		if _, _, err := collect(strings.NewReader(s), 10, 0, ""); err == nil {
			t.Errorf("collect(%q) accepted malformed JSON", s)
		}
	}
}
