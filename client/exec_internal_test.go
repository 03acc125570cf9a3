package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/wire"
)

// The fast path must agree with the JSON decoder on every output line the
// broker can write, and step aside for anything else.
func TestFastOutputAgreesWithJSON(t *testing.T) {
	payloads := [][]byte{
		[]byte("a"), []byte("ab"), []byte("abc"), {0, 0xff, 0xfe, '\n', '"', '\\'},
		bytes.Repeat([]byte{0xfb, 0xff}, 40000), // '+' and '/' in the base64
	}
	var buf []byte
	for _, p := range payloads {
		// The broker's own line type, so a change of its form shows here.
		raw, err := json.Marshal(wire.ExecLine{Type: "output", Data: p})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := fastOutput(raw, &buf)
		if !ok || !bytes.Equal(got, p) {
			t.Fatalf("fast path on %d bytes: ok=%v, equal=%v", len(p), ok, bytes.Equal(got, p))
		}
	}
	for _, raw := range []string{
		`{"type":"output","data":"YWJj\u002b"}`, // an escape: the decoder's job
		`{"data":"YWJj","type":"output"}`,       // another field order
		`{"type":"output","data":"not base64!"}`,
		`{"type":"exit","exitCode":0}`,
		`{"type":"output","data":"`,
	} {
		if _, ok := fastOutput([]byte(raw), &buf); ok {
			t.Errorf("fast path took %s", raw)
		}
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	in := "one\n\n" + long + "\r\ntwo\nlast-without-newline"
	lr := newLineReader(strings.NewReader(in))
	for _, want := range []string{"one", long, "two", "last-without-newline"} {
		got, err := lr.next()
		if err != nil || string(got) != want {
			t.Fatalf("next() = %d bytes, %v; want %d bytes", len(got), err, len(want))
		}
	}
	if _, err := lr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}

	broken := io.MultiReader(strings.NewReader("partial"), errReader{errors.New("connection reset")})
	if _, err := newLineReader(broken).next(); err == nil || err.Error() != "connection reset" {
		t.Fatalf("a broken stream: %v, want its error, not the partial line", err)
	}
	huge := strings.NewReader(strings.Repeat("y", maxStreamLine+(1<<20)))
	if _, err := newLineReader(huge).next(); err == nil {
		t.Fatal("a line over the limit was accepted")
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
