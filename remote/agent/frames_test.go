package agent_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/wsbroker/wsbroker/remote/agent"
)

// Helpers for tests that speak the agent's protocol themselves: raw
// streams, requests and frames, without agentclient in between.

// rawAgent serves an agent on one end of a pipe and returns a yamux
// session on the other, and the result of ServeConn once the session is
// closed.
func rawAgent(t *testing.T) (*yamux.Session, <-chan error) {
	t.Helper()
	agentBinary(t)
	return rawServer(t, &agent.Server{Self: binary})
}

// rawServer is rawAgent with s, which need not be able to run commands.
func rawServer(t *testing.T, s *agent.Server) (*yamux.Session, <-chan error) {
	t.Helper()
	brokerEnd, agentEnd := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(agentEnd) }()
	if _, err := agent.Hello(brokerEnd); err != nil {
		t.Fatal(err)
	}
	sess, err := yamux.Client(brokerEnd, agent.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess, done
}

// openExec opens an exec stream for spec, in /, its reads bounded.
func openExec(t *testing.T, sess *yamux.Session, spec agent.ExecSpec) net.Conn {
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

// sendFrame writes one frame of typ to st.
func sendFrame(t *testing.T, st net.Conn, typ byte, payload string) {
	t.Helper()
	if err := agent.WriteFrame(st, typ, []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// stillServes checks that the agent behind sess answers an identity
// request after what the test did to it (after), then closes sess and
// checks that ServeConn (done) ended cleanly.
func stillServes(t *testing.T, sess *yamux.Session, done <-chan error, after string) {
	t.Helper()
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
		t.Fatalf("after %s, identity = %+v, %v", after, id, err)
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
