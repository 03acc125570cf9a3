package agent_test

import (
	enc "encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/wsbroker/wsbroker/agent"
)

// TestBadRequestsCloseTheirStreamOnly: a header over the size limit, one
// that is not JSON, an unknown op and an exec without a command each end
// their own stream, and the agent goes on serving the same connection.
func TestBadRequestsCloseTheirStreamOnly(t *testing.T) {
	brokerEnd, agentEnd := net.Pipe()
	s := &agent.Server{}
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(agentEnd) }()
	if _, err := agent.Hello(brokerEnd); err != nil {
		t.Fatal(err)
	}
	sess, err := yamux.Client(brokerEnd, agent.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	header := func(size uint32, body string) []byte {
		return append(enc.BigEndian.AppendUint32(nil, size), body...)
	}
	for name, raw := range map[string][]byte{
		"oversized header": header(64<<20, ""),
		"not JSON":         header(5, "{{{{{"),
		"unknown op":       header(16, `{"op":"bogus!!"}`),
		"exec without one": header(13, `{"op":"exec"}`),
	} {
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := st.Write(raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := io.Copy(io.Discard, st); err != nil || n != 0 {
			t.Errorf("%s: the agent answered %d bytes, %v; want the stream closed", name, n, err)
		}
		st.Close()
	}

	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.WriteRequest(st, agent.Request{Op: agent.OpIdentity}); err != nil {
		t.Fatal(err)
	}
	var id agent.Identity
	_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := json.NewDecoder(st).Decode(&id); err != nil || len(id.GIDs) == 0 {
		t.Fatalf("after the bad requests, identity = %+v, %v", id, err)
	}
	sess.Close()
	if err := <-done; err != nil {
		t.Errorf("ServeConn: %v", err)
	}
}

// TestBadExecFramesEndOnlyTheirStream: on exec streams, a signal frame
// that is not a number from 1 to 64 is refused while the stream goes on;
// stdin for a command without one, stdin over the window and a stray end
// of stdin end their own stream (the command is killed); a repeated end
// of stdin is harmless. The agent goes on serving the connection.
func TestBadExecFramesEndOnlyTheirStream(t *testing.T) {
	agentBinary(t)
	brokerEnd, agentEnd := net.Pipe()
	s := &agent.Server{Self: binary}
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(agentEnd) }()
	if _, err := agent.Hello(brokerEnd); err != nil {
		t.Fatal(err)
	}
	sess, err := yamux.Client(brokerEnd, agent.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	open := func(spec agent.ExecSpec) net.Conn {
		t.Helper()
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		spec.Cwd, spec.GraceMS = "/", 500
		if err := agent.WriteRequest(st, agent.Request{Op: agent.OpExec, Exec: &spec}); err != nil {
			t.Fatal(err)
		}
		_ = st.SetReadDeadline(time.Now().Add(20 * time.Second))
		return st
	}
	sh := func(command string) []string { return []string{"/bin/sh", "-c", command} }
	send := func(st net.Conn, typ byte, payload string) {
		t.Helper()
		if err := agent.WriteFrame(st, typ, []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}

	// Refused signals, then a good one: the stream goes on to the exit.
	st := open(agent.ExecSpec{Argv: sh("exec sleep 30")})
	for _, bad := range []string{"", "abc", "0", "65", "-15", "+9", "09", " 15", "1e3", "99999999999999999999"} {
		send(st, agent.FrameSignal, bad)
	}
	send(st, agent.FrameSignal, "15")
	if got := readExec(st); got.exit != "143" {
		t.Errorf("after refused signals, SIGTERM: %+v, want exit 143", got)
	}
	st.Close()

	for name, breach := range map[string]struct {
		spec  agent.ExecSpec
		write func(net.Conn)
	}{
		"stdin without one": {agent.ExecSpec{Argv: sh("exec sleep 30")},
			func(st net.Conn) { send(st, agent.FrameStdin, "x") }},
		"end of stdin without one": {agent.ExecSpec{Argv: sh("exec sleep 30")},
			func(st net.Conn) { send(st, agent.FrameStdinEOF, "") }},
		"stdin over the window": {agent.ExecSpec{Argv: sh("exec sleep 30"), Stdin: true},
			func(st net.Conn) {
				chunk := strings.Repeat("y", agent.MaxFrame)
				for range 2 * agent.StdinWindow / agent.MaxFrame {
					send(st, agent.FrameStdin, chunk)
				}
			}},
	} {
		st := open(breach.spec)
		begin := time.Now()
		breach.write(st)
		got := readExec(st)
		if got.err != nil || got.exit != "" || time.Since(begin) > 10*time.Second {
			t.Errorf("%s: %+v after %s; want the stream ended, without the exit of the sleep", name, got, time.Since(begin))
		}
		st.Close()
	}

	// A repeated end of stdin is harmless; every byte is acknowledged.
	st = open(agent.ExecSpec{Argv: []string{"cat"}, Stdin: true})
	send(st, agent.FrameStdin, "abc")
	send(st, agent.FrameStdin, "")
	send(st, agent.FrameStdinEOF, "")
	send(st, agent.FrameStdinEOF, "")
	if got := readExec(st); got.exit != "0" || got.out != "abc" || got.acked != 3 {
		t.Errorf("cat with its stdin ended twice: %+v, want output abc, 3 bytes acknowledged, exit 0", got)
	}
	st.Close()

	st, err = sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.WriteRequest(st, agent.Request{Op: agent.OpIdentity}); err != nil {
		t.Fatal(err)
	}
	var id agent.Identity
	_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := json.NewDecoder(st).Decode(&id); err != nil || len(id.GIDs) == 0 {
		t.Fatalf("after the bad frames, identity = %+v, %v", id, err)
	}
	sess.Close()
	if err := <-done; err != nil {
		t.Errorf("ServeConn: %v", err)
	}
}

// execFrames is what an exec stream said until its exit or its end.
type execFrames struct {
	out, exit string
	acked     int
	err       error // a read that failed other than at the stream's end
}

func readExec(st net.Conn) execFrames {
	var got execFrames
	fr := agent.NewFrameReader(st)
	for {
		typ, p, err := fr.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				got.err = err
			}
			return got
		}
		switch typ {
		case agent.FrameOutput:
			got.out += string(p)
		case agent.FrameStdinAck:
			n, _ := strconv.Atoi(string(p))
			got.acked += n
		case agent.FrameExit:
			got.exit = string(p)
			return got
		}
	}
}
