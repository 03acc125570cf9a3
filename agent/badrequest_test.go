package agent_test

import (
	enc "encoding/binary"
	"encoding/json"
	"io"
	"net"
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
