package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Version is the protocol version this build speaks; MinVersion the
// oldest it accepts from a peer. Version 2 added a command's stdin and
// signals (StdioVersion), version 3 its terminal (TTYVersion), version 4
// file bytes as raw streams, both ways (RawVersion). Older
// peers are still served: an agent never sends a client anything it did
// not ask for (FrameStdinAck and FrameStdinClosed answer stdin only,
// which an older client never sends), and a client refuses, before it
// asks, what an older agent would silently ignore.
const (
	Version    = 4
	MinVersion = 1
)

// StdioVersion is the first version that carries a command's stdin
// (ExecSpec.Stdin, FrameStdin, FrameStdinEOF) and signals (FrameSignal).
const StdioVersion = 2

// TTYVersion is the first version that runs a command on a terminal
// (ExecSpec.TTY, FrameResize).
const TTYVersion = 3

// RawVersion is the first version that serves OpRead, OpWrite and
// OpReadDir.
const RawVersion = 4

// helloPrefix starts each side's hello line.
const helloPrefix = "wsb-agent "

// maxHello bounds a hello line; maxHeader a request header.
const (
	maxHello  = 128
	maxHeader = 1 << 20
)

// StreamWindow is each stream's flow-control window: what a stream may
// have in flight, and so what its receiver may buffer. 2 MiB keeps a bulk
// read's pipeline full while a command streaming a gigabyte keeps the
// broker's heap within the conformance suite's bound (8 MiB grew it past
// 40 MB).
const StreamWindow = 2 << 20

// Hello sends this side's hello and reads the peer's; it returns the
// version both speak.
func Hello(rw io.ReadWriter) (int, error) {
	errc := make(chan error, 1)
	go func() {
		_, err := io.WriteString(rw, helloPrefix+strconv.Itoa(Version)+"\n")
		errc <- err
	}()
	line, err := readLine(rw, maxHello)
	if werr := <-errc; err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return 0, fmt.Errorf("agent hello: %w", err)
	}
	v, ok := strings.CutPrefix(line, helloPrefix)
	n, cerr := strconv.Atoi(v)
	if !ok || cerr != nil {
		return 0, fmt.Errorf("agent hello: not a wsb-agent peer (it said %q)", truncate(line, 64))
	}
	if n < MinVersion {
		return 0, fmt.Errorf("agent hello: peer speaks version %d, the oldest accepted is %d", n, MinVersion)
	}
	return min(n, Version), nil
}

// readLine reads up to '\n' one byte at a time, so that nothing after the
// line is consumed (yamux takes the connection next).
func readLine(r io.Reader, limit int) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for len(b) < limit {
		if _, err := io.ReadFull(r, one); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
	return "", errors.New("line too long")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// MuxConfig is the yamux configuration of both sides.
func MuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.MaxStreamWindowSize = StreamWindow
	c.AcceptBacklog = 1024
	c.ConnectionWriteTimeout = 30 * time.Second
	c.KeepAliveInterval = 15 * time.Second
	c.StreamOpenTimeout = 30 * time.Second
	c.StreamCloseTimeout = 30 * time.Second
	c.LogOutput = io.Discard
	return c
}

// Ops of a Request.
const (
	OpSFTP     = "sftp"
	OpExec     = "exec"
	OpIdentity = "id" // the agent answers with its Identity, as JSON
	// OpRead streams the regular file at Request.Path: the agent answers
	// a ReadReply header (as a request's: length and JSON), then, if it
	// opened the file, exactly ReadReply.Size bytes (all there is when
	// Size is 0, for a pseudo-file whose size says nothing) and closes
	// the stream. Fewer bytes mean the read failed. Version 4.
	OpRead = "read"
	// OpWrite replaces the file at Request.Path with the stream's bytes,
	// atomically, as SFTP's AtomicWrite extension does
	// (sftpserver.AtomicWrite: links followed, a temporary file given the
	// old file's mode and owner, synced when Request.Sync, renamed over
	// the target). The bytes come in chunks (WriteChunks); the empty
	// chunk ends them. A stream that ends before it leaves the file
	// untouched. The agent answers a WriteReply header. Version 4.
	OpWrite = "write"
	// OpReadDir lists the directory at Request.Path in one answer: a
	// ReadDirReply header, then, if it was read, the entries as one gob
	// []DirEntry (sorted by name, each described as a stat would:
	// a link by its target where it resolves, flagged Symlink; times in
	// whole seconds, as SFTP gives them). Version 4.
	OpReadDir = "readdir"
)

// DirEntry is an entry of OpReadDir's list: opsapi.FileInfo with its
// time in Unix seconds. The list is a gob, not JSON: decoding a thousand
// JSON entries (their RFC 3339 times above all) was most of a listing's
// cost, and both ends are this package.
type DirEntry struct {
	Name    string
	Type    opsapi.FileType
	Size    int64
	Mode    uint32
	ModTime int64
	Symlink bool
}

// NewDirEntry is fi as a DirEntry.
func NewDirEntry(fi opsapi.FileInfo) DirEntry {
	return DirEntry{Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: uint32(fi.Mode), ModTime: fi.ModTime.Unix(), Symlink: fi.Symlink}
}

// FileInfo is e as opsapi.FileInfo.
func (e DirEntry) FileInfo() opsapi.FileInfo {
	return opsapi.FileInfo{Name: e.Name, Type: e.Type, Size: e.Size, Mode: fs.FileMode(e.Mode).Perm(), ModTime: time.Unix(e.ModTime, 0), Symlink: e.Symlink}
}

// ReadDirReply answers OpReadDir.
type ReadDirReply struct {
	// Errno is why the directory could not be read (ENOENT, ENOTDIR...).
	Errno int `json:"errno,omitempty"`
}

// WriteReply answers OpWrite once its bytes have ended.
type WriteReply struct {
	// Errno is why the file was not replaced (ENOENT, EISDIR, ENOSPC...).
	Errno int `json:"errno,omitempty"`
}

// ReadReply answers OpRead.
type ReadReply struct {
	Size int64 `json:"size"`
	// Errno is why the file could not be opened (ENOENT, EACCES, EISDIR...).
	Errno int `json:"errno,omitempty"`
	// Invalid says why a path that opened is not read (not a regular file).
	Invalid string `json:"invalid,omitempty"`
}

// Identity is the account the agent runs as, which is the account of
// every file operation and command it serves.
type Identity struct {
	UID  int   `json:"uid"`
	GIDs []int `json:"gids"` // primary group first
}

// Request opens a stream.
type Request struct {
	Op   string    `json:"op"`
	Exec *ExecSpec `json:"exec,omitempty"`
	// Path is the absolute path of OpRead, OpWrite and OpReadDir.
	Path string `json:"path,omitempty"`
	// Sync asks OpWrite to fsync the new content before its rename.
	Sync bool `json:"sync,omitempty"`
}

// ExecSpec is a command to run.
type ExecSpec struct {
	// Shell runs Command as `Shell -c Command`.
	Shell   string `json:"shell"`
	Command string `json:"command"`
	// Cwd is an absolute directory.
	Cwd string `json:"cwd"`
	// Env are KEY=VALUE pairs added over the agent's own environment.
	Env []string `json:"env,omitempty"`
	// GraceMS is the time between SIGTERM and SIGKILL when killed.
	GraceMS int64 `json:"graceMs"`
	// Argv, when set, is run as it is instead of Shell -c Command.
	Argv []string `json:"argv,omitempty"`
	// Stderr sends stderr in frames of its own (FrameStderr) instead of
	// merging it into the output.
	Stderr bool `json:"stderr,omitempty"`
	// Stdin gives the command a pipe as its stdin, fed by the client's
	// FrameStdin frames and closed by FrameStdinEOF; without it the
	// command's stdin is /dev/null. Version 2.
	Stdin bool `json:"stdin,omitempty"`
	// TTY runs the command on a pseudo-terminal of this size: the
	// terminal is its stdin, stdout and stderr and its controlling
	// terminal, in a session of its own. Output comes as FrameOutput (no
	// FrameStderr: Stderr is ignored), Stdin's bytes are typed at it and
	// FrameResize changes its size. Version 3.
	TTY *TTYSize `json:"tty,omitempty"`
}

// TTYSize is a terminal's size in character cells.
type TTYSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// argv is what the reaper starts.
func (s ExecSpec) argv() []string {
	if len(s.Argv) > 0 {
		return s.Argv
	}
	return []string{s.Shell, "-c", s.Command}
}

// WriteRequest writes a stream's header.
func WriteRequest(w io.Writer, req Request) error { return writeHeader(w, req) }

// ReadRequest reads a stream's header.
func ReadRequest(r io.Reader) (Request, error) {
	var req Request
	err := readHeader(r, &req)
	return req, err
}

// WriteReadReply writes OpRead's answer header.
func WriteReadReply(w io.Writer, rep ReadReply) error { return writeHeader(w, rep) }

// ReadReadReply reads OpRead's answer header.
func ReadReadReply(r io.Reader) (ReadReply, error) {
	var rep ReadReply
	err := readHeader(r, &rep)
	return rep, err
}

// WriteWriteReply writes OpWrite's answer header.
func WriteWriteReply(w io.Writer, rep WriteReply) error { return writeHeader(w, rep) }

// ReadWriteReply reads OpWrite's answer header.
func ReadWriteReply(r io.Reader) (WriteReply, error) {
	var rep WriteReply
	err := readHeader(r, &rep)
	return rep, err
}

// maxChunk bounds a chunk's announced length.
const maxChunk = 16 << 20

// WriteChunks writes src to w as OpWrite's bytes: chunks of a 4-byte
// big-endian length and the bytes, then the empty chunk that commits
// them once src has ended (io.EOF). A src that fails leaves the end out,
// so the stream's close is an abort, which a plain end of stream could
// not say. Each chunk is one Write, its length with it, and the last
// carries the end too: each Write is a yamux frame, a wait on its send
// loop and a TLS record, and a small file paid three where one does.
func WriteChunks(w io.Writer, src io.Reader) (int64, error) {
	bp := chunkBuffers.Get().(*[]byte)
	defer chunkBuffers.Put(bp)
	buf := *bp
	// One byte past a full chunk is read to learn whether src goes on;
	// it starts the next chunk.
	var total int64
	carry := 0
	for {
		n, err := fill(src, buf[4+carry:4+WriteChunk+1])
		n += carry
		switch {
		case err == nil: // a full chunk and one byte more
			binary.BigEndian.PutUint32(buf, WriteChunk)
			if _, err := w.Write(buf[:4+WriteChunk]); err != nil {
				return total, err
			}
			total += WriteChunk
			buf[4] = buf[4+WriteChunk]
			carry = 1
			continue
		case err == io.EOF: //nolint:errorlint // io.EOF is returned as is; a wrapped one is a failure
		default:
			return total, err
		}
		// The last chunk and the empty one, or the empty one alone.
		last := buf[:4]
		if n > 0 {
			binary.BigEndian.PutUint32(buf, uint32(n))
			last = buf[:4+n+4]
		}
		clear(last[len(last)-4:])
		if _, err := w.Write(last); err != nil {
			return total, err
		}
		return total + int64(n), nil
	}
}

// fill reads src into b until b is full (err nil) or src ends: io.EOF
// only for a clean end. Unlike io.ReadFull it passes on what src said: a
// request body cut short answers io.ErrUnexpectedEOF, which must abort
// the write, while ReadFull says the same of a clean end that left b
// part full.
func fill(src io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := src.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// chunkBuffers keep WriteChunks' buffers: a chunk with its length, the
// byte read past it and the end.
var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, 4+WriteChunk+1+4); return &b }}

// WriteChunk is the size of OpWrite's chunks, and so of the yamux frames
// carrying a write. Unlike a read's (RawChunk), they are kept small: yamux
// holds a stream's receive buffer locked while a whole frame comes in, so
// the agent's writes to the file take turns with large frames instead of
// overlapping them, and each new stream's buffer grows (zeroed, then
// collected) to the largest frame it holds. The 100 MiB tar of 1 MiB
// files took 295 ms (p50) in-process with 512 KiB frames, 246 ms with
// 128 KiB (BenchmarkEngine/Extract100MiB, one interleaved run).
const WriteChunk = 128 << 10

// ChunkReader reads what WriteChunks wrote: io.EOF after the empty
// chunk, io.ErrUnexpectedEOF when the stream ends before it.
type ChunkReader struct {
	r    io.Reader
	left uint32 // of the current chunk
	done bool
}

// NewChunkReader reads chunks from r.
func NewChunkReader(r io.Reader) *ChunkReader { return &ChunkReader{r: r} }

func (c *ChunkReader) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		var n [4]byte
		if _, err := io.ReadFull(c.r, n[:]); err != nil {
			return 0, unexpected(err)
		}
		c.left = binary.BigEndian.Uint32(n[:])
		if c.left == 0 {
			c.done = true
			return 0, io.EOF
		}
		if c.left > maxChunk {
			return 0, fmt.Errorf("chunk of %d bytes is over the %d-byte limit", c.left, maxChunk)
		}
	}
	if uint32(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= uint32(n)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return n, unexpected(err)
	}
	return n, nil
}

// WriteTo copies the chunks' bytes to w as they come, up to a chunk at
// a time: io.Copy to a file would otherwise write 32 KiB per system call.
func (c *ChunkReader) WriteTo(w io.Writer) (int64, error) {
	return CopyLarge(w, struct{ io.Reader }{c})
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteReadDirReply writes OpReadDir's answer header.
func WriteReadDirReply(w io.Writer, rep ReadDirReply) error { return writeHeader(w, rep) }

// ReadReadDirReply reads OpReadDir's answer header.
func ReadReadDirReply(r io.Reader) (ReadDirReply, error) {
	var rep ReadDirReply
	err := readHeader(r, &rep)
	return rep, err
}

// writeHeader writes v as a 4-byte big-endian length and its JSON.
func writeHeader(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxHeader {
		return fmt.Errorf("header of %d bytes is over the %d-byte limit", len(b), maxHeader)
	}
	buf := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	_, err = w.Write(append(buf, b...))
	return err
}

// readHeader reads what writeHeader wrote into v.
func readHeader(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxHeader {
		return fmt.Errorf("header of %d bytes is over the %d-byte limit", size, maxHeader)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	return nil
}

// Frame types of an exec stream. From the agent: output, exit, error,
// killed, end of output and stdin's credit; from the client: kill,
// signal and stdin (version 2) and a terminal's size (version 3).
//
// Stdin is flow-controlled by credit, so that a command that does not
// read it cannot hold up the stream: the client keeps at most
// StdinWindow bytes of FrameStdin unacknowledged, and the agent queues
// them and writes them to the pipe from a goroutine of its own, answering
// FrameStdinAck for each chunk written (or dropped, once the pipe is
// broken). The agent's reading of the client's frames, a kill among
// them, never waits on the command. A client that sends stdin over its
// window, after its FrameStdinEOF, or without ExecSpec.Stdin breaks the
// protocol: the agent ends the stream, which kills the command.
//
// On a terminal (ExecSpec.TTY) the output is what the terminal displays,
// relayed from its master side until every holder of the terminal has
// closed it (then FrameEOF); stdin is typed at it, with the same credit,
// and FrameStdinEOF only stops the typing (a terminal has no end of
// input). FrameResize sets its size; one that is malformed, or for a
// command without a terminal, is dropped and the stream goes on.
const (
	FrameOutput      = 'o' // command output bytes
	FrameStderr      = 's' // stderr bytes, when asked for apart
	FrameExit        = 'x' // the command exited: its status, decimal
	FrameError       = 'e' // it could not start: "nocwd", "notdir", "noperm" or "start: why"
	FrameKilled      = 'k' // the kill is done: processes signalled, decimal
	FrameEOF         = 'z' // every holder of the output closed it
	FrameStdinAck    = 'a' // this many stdin bytes left the agent's queue, decimal
	FrameStdinClosed = 'c' // every holder of the command's stdin closed it: stop sending
	FrameKill        = 'K' // client: kill the whole tree
	FrameSignal      = 'S' // client: send this signal (1 to 64, decimal) to the whole tree
	FrameStdin       = 'I' // client: bytes for the command's stdin
	FrameStdinEOF    = 'Z' // client: close the command's stdin
	FrameResize      = 'R' // client: the terminal's new size, "rows cols" in decimal (version 3)
)

// StdinWindow is how many stdin bytes the client may have sent and not
// yet seen acknowledged (FrameStdinAck), and so what the agent queues at
// most for one command.
const StdinWindow = 256 << 10

// MaxSignal is the highest signal number FrameSignal carries (Linux's
// SIGRTMAX).
const MaxSignal = 64

// MaxFrame bounds a frame's payload.
const MaxFrame = 64 << 10

// WriteFrame writes one frame: its type, a 4-byte big-endian length and
// the payload. Callers serialise writes to one stream.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes is over the %d-byte limit", len(payload), MaxFrame)
	}
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if len(payload) == 0 {
		_, err := w.Write(h[:])
		return err
	}
	buf := make([]byte, 0, 5+len(payload))
	_, err := w.Write(append(append(buf, h[:]...), payload...))
	return err
}

// FrameReader reads frames; its buffer is reused, so a payload is valid
// until the next Read.
type FrameReader struct {
	r   *bufio.Reader
	buf []byte
}

// NewFrameReader reads frames from r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Read returns the next frame.
func (f *FrameReader) Read() (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes is over the %d-byte limit", n, MaxFrame)
	}
	if cap(f.buf) < int(n) {
		f.buf = make([]byte, n)
	}
	b := f.buf[:n]
	if _, err := io.ReadFull(f.r, b); err != nil {
		return 0, nil, err
	}
	return h[0], b, nil
}
