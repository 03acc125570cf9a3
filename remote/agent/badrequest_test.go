package agent_test

import (
	enc "encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/remote/agent"
)

// TestBadRequestsCloseTheirStreamOnly: a header over the size limit, one
// that is not JSON, an unknown op and an exec without a command each end
// their own stream, and the agent goes on serving the same connection.
func TestBadRequestsCloseTheirStreamOnly(t *testing.T) {
	sess, done := rawServer(t, &agent.Server{})

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
	stillServes(t, sess, done, "the bad requests")
}

// TestBadExecFramesEndOnlyTheirStream: on exec streams, a signal frame
// that is not a number from 1 to 64 is refused while the stream goes on;
// stdin for a command without one, stdin over the window and a stray end
// of stdin end their own stream (the command is killed); a repeated end
// of stdin is harmless. The agent goes on serving the connection.
func TestBadExecFramesEndOnlyTheirStream(t *testing.T) {
	sess, done := rawAgent(t)
	open := func(spec agent.ExecSpec) net.Conn { t.Helper(); return openExec(t, sess, spec) }
	sh := func(command string) []string { return []string{"/bin/sh", "-c", command} }
	send := func(st net.Conn, typ byte, payload string) { t.Helper(); sendFrame(t, st, typ, payload) }

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
	stillServes(t, sess, done, "the bad frames")
}

// TestKillAfterTheJobIsDoneIsAnswered: a kill that comes after the
// command's tree is gone (the reaper has closed the job's status pipe and
// ignores it) is still answered, with 0. The client waits for that answer
// up to half a minute, and a cancel during its drain after the exit comes
// just then (docker's SIGTERM-to-a-setsid-child conformance case hung so
// under load).
func TestKillAfterTheJobIsDoneIsAnswered(t *testing.T) {
	sess, _ := rawAgent(t)
	st := openExec(t, sess, agent.ExecSpec{Argv: []string{"/bin/sh", "-c", "exit 3"}})
	defer st.Close()
	if got := readExec(st); got.exit != "3" {
		t.Fatalf("exec: %+v, want exit 3", got)
	}
	time.Sleep(500 * time.Millisecond) // the reaper says idle and closes the status pipe
	if err := agent.WriteFrame(st, agent.FrameKill, nil); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(5 * time.Second))
	fr := agent.NewFrameReader(st)
	for {
		typ, p, err := fr.Read()
		if err != nil {
			t.Fatalf("no answer to a kill after the job was done: %v", err)
		}
		if typ == agent.FrameKilled {
			if string(p) != "0" {
				t.Errorf("killed %q, want 0", p)
			}
			return
		}
	}
}
