package httpguard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBodyBudgetHoldsUntilTheRequestEnds: a body's bytes count until its
// context ends; a body that would pass the budget is ErrOverBudget, with
// or without a declared length; bodies of unknown length grow by
// doubling, each growth taken first.
func TestBodyBudgetHoldsUntilTheRequestEnds(t *testing.T) {
	b := NewBodyBudget(10 << 10)
	ctx, end := context.WithCancel(t.Context())
	data, err := b.Read(ctx, strings.NewReader(strings.Repeat("a", 6000)), 6000)
	if err != nil || len(data) != 6000 || b.InUse() != 6000 {
		t.Fatalf("declared body: %d bytes, %v; %d in use", len(data), err, b.InUse())
	}
	if _, err := b.Read(ctx, strings.NewReader(strings.Repeat("b", 6000)), 6000); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("a second body past the budget: %v", err)
	}
	// Unknown length: 4 KiB, then 8 KiB in all, which does not fit beside 6000.
	if _, err := b.Read(ctx, strings.NewReader(strings.Repeat("c", 5000)), -1); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("an undeclared body past the budget: %v", err)
	}
	if b.InUse() != 6000+4096 {
		t.Fatalf("%d bytes in use; want the first body's and the second's first 4 KiB until the request ends", b.InUse())
	}
	end()
	deadline := time.Now().Add(5 * time.Second)
	for b.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held after the request ended", b.InUse())
		}
		time.Sleep(time.Millisecond)
	}
	data, err = b.Read(t.Context(), strings.NewReader(strings.Repeat("c", 5000)), -1)
	if err != nil || len(data) != 5000 {
		t.Fatalf("undeclared body after the release: %d bytes, %v", len(data), err)
	}
	if _, err := b.Read(t.Context(), strings.NewReader("abcd"), 3); err == nil || !strings.Contains(err.Error(), "does not end at its Content-Length") {
		t.Fatalf("a body longer than declared: %v", err)
	}
}

// TestHostSet: the default set is the loopback names and the listen
// host; listening on every address accepts any IP literal but no other
// name; "*" accepts everything.
func TestHostSet(t *testing.T) {
	cases := []struct {
		allowed []string
		listen  string
		yes, no []string
	}{
		{nil, "broker.internal:8080", []string{"localhost:8080", "127.0.0.1", "[::1]:80", "Broker.Internal.", "LOCALHOST"},
			[]string{"evil.example", "10.0.0.1", ""}},
		{nil, "0.0.0.0:8080", []string{"10.0.0.1:8080", "[fe80::1]", "localhost"}, []string{"evil.example"}},
		{[]string{"api.example"}, "127.0.0.1:1", []string{"api.example:443"}, []string{"localhost", "127.0.0.1"}},
		{[]string{"*"}, "", []string{"anything", "10.0.0.1"}, nil},
	}
	for _, c := range cases {
		hs := NewHostSet(c.allowed, c.listen)
		for _, h := range c.yes {
			if !hs.Allows(h) {
				t.Errorf("%v on %s refuses %q", c.allowed, c.listen, h)
			}
		}
		for _, h := range c.no {
			if hs.Allows(h) {
				t.Errorf("%v on %s allows %q", c.allowed, c.listen, h)
			}
		}
	}
}

// TestDecodeNamesTheField: unknown fields are refused and a type
// mismatch names the field and the JSON type expected.
func TestDecodeNamesTheField(t *testing.T) {
	var v struct {
		Name  string   `json:"name"`
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
	}
	for in, want := range map[string]string{
		`{"name":1}`:     `field "name": expected string, got JSON number at offset 9`,
		`{"count":"x"}`:  `field "count": expected number, got JSON string at offset 12`,
		`{"tags":{}}`:    `field "tags": expected array, got JSON object at offset 9`,
		`{"other":true}`: `unknown field "other"`,
		`[1]`:            `body: expected object, got JSON array at offset 1`,
	} {
		if err := Decode([]byte(in), &v); err == nil || err.Error() != want {
			t.Errorf("Decode(%s) = %v, want %s", in, err, want)
		}
	}
	if err := Decode([]byte(`{"name":"a","count":2,"tags":["x"]}`), &v); err != nil || v.Name != "a" || v.Count != 2 {
		t.Fatalf("Decode: %+v %v", v, err)
	}
}

// TestConnLimiterPerPeer: past perPeer connections from one address a
// new one is closed at once; closing one gives its slot back.
func TestConnLimiterPerPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConns(ln, 10, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	first, _ := dial(), dial()
	a := <-accepted
	<-accepted
	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := third.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("a third connection from one peer: %d bytes, %v; want it closed", n, err)
	}
	_ = first.Close()
	_ = a.Close()
	fourth := dial()
	select {
	case c := <-accepted:
		if _, err := fourth.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || !bytes.Equal(buf, []byte("x")) {
			t.Fatalf("the connection after the close: %q %v", buf, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted after one closed")
	}
}
