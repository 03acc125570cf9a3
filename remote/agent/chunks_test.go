package agent_test

import (
	"bytes"
	be "encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/wsbroker/wsbroker/remote/agent"
)

// writes records each Write on its own.
type writes [][]byte

func (w *writes) Write(p []byte) (int, error) {
	*w = append(*w, bytes.Clone(p))
	return len(p), nil
}

// TestWriteChunksIsOneWritePerChunk: each chunk goes in one Write with
// its length, the last one with the end, and ChunkReader gives the bytes
// back whole, whatever the size against the chunk's.
func TestWriteChunksIsOneWritePerChunk(t *testing.T) {
	const c = agent.WriteChunk
	for _, size := range []int{0, 1, c - 1, c, c + 1, 3*c + 5} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		var w writes
		// OneByteReader: the source's pieces say nothing of the chunks'.
		n, err := agent.WriteChunks(&w, iotest.OneByteReader(bytes.NewReader(data)))
		if err != nil || n != int64(size) {
			t.Fatalf("%d bytes: WriteChunks = %d, %v", size, n, err)
		}
		if want := max(1, (size+c-1)/c); len(w) != want {
			t.Errorf("%d bytes in %d writes, want %d", size, len(w), want)
		}
		for i, p := range w {
			if size > 0 && int(be.BigEndian.Uint32(p)) != min(c, size-i*c) {
				t.Errorf("%d bytes: write %d announces %d bytes", size, i, be.BigEndian.Uint32(p))
			}
		}
		if last := w[len(w)-1]; !bytes.HasSuffix(last, make([]byte, 4)) {
			t.Errorf("%d bytes: the last write does not end with the empty chunk", size)
		}
		var got bytes.Buffer
		if _, err := io.Copy(&got, agent.NewChunkReader(bytes.NewReader(bytes.Join(w, nil)))); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Errorf("%d bytes: read back %d bytes, %v", size, got.Len(), err)
		}
	}
}

// TestWriteChunksLeavesTheEndOutOnAFailure: a source that fails sends no
// end, so the agent takes the stream's close for an abort.
// A request body cut short says io.ErrUnexpectedEOF: that is a failure
// too, however much came before it.
func TestWriteChunksLeavesTheEndOutOnAFailure(t *testing.T) {
	for _, size := range []int{0, 10, agent.WriteChunk - 1, agent.WriteChunk, agent.WriteChunk + 10} {
		for _, boom := range []error{errors.New("source failed"), io.ErrUnexpectedEOF} {
			var w writes
			src := io.MultiReader(bytes.NewReader(make([]byte, size)), iotest.ErrReader(boom))
			if _, err := agent.WriteChunks(&w, src); !errors.Is(err, boom) {
				t.Fatalf("%d bytes then %v: WriteChunks = %v", size, boom, err)
			}
			_, err := io.Copy(io.Discard, agent.NewChunkReader(bytes.NewReader(bytes.Join(w, nil))))
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%d bytes then %v: reading what was sent: %v, want io.ErrUnexpectedEOF", size, boom, err)
			}
		}
	}
}
