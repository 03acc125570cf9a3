package opsapi

import (
	"context"
	"io"
	"io/fs"
	"syscall"
	"time"
)

// FileType says what a path is.
type FileType string

// The file types a backend reports.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink" // only for a link that cannot be followed
	TypeOther   FileType = "other"   // devices, sockets, fifos
)

// FileInfo describes a path. Stat and ReadDir follow symbolic links, so Type,
// Size and Mode describe the link's target; Symlink records that the path
// itself is a link. A link that cannot be followed (dangling, or pointing
// outside a confined root) has Type TypeSymlink.
type FileInfo struct {
	Name    string      `json:"name"`
	Type    FileType    `json:"type"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"` // permission bits only
	ModTime time.Time   `json:"mtime"`
	Symlink bool        `json:"symlink,omitempty"`
}

// IsDir reports whether the path is (or links to) a directory.
func (fi FileInfo) IsDir() bool { return fi.Type == TypeDir }

// AccessMode selects what Access checks.
type AccessMode int

// Access modes; they combine with |.
const (
	AccessRead  AccessMode = 1 << iota // readable
	AccessWrite                        // writable
)

// ReadOperations is what the read tool needs (pi's ReadOperations).
// Image detection is done by the tool from the file's first bytes, so it
// needs no backend method.
type ReadOperations interface {
	// Open opens path for reading; the caller closes it. A missing path is
	// ErrNotExist, a directory ErrIsDir, a path outside a confined root or
	// an unreadable file ErrPermission. Reading stops with ErrCanceled or
	// ErrTimeout when ctx ends.
	Open(ctx context.Context, path string) (io.ReadCloser, error)
	// Access checks that path exists and allows mode: ErrNotExist when it
	// is missing, ErrPermission when it exists but mode is not allowed or
	// it lies outside a confined root.
	Access(ctx context.Context, path string, mode AccessMode) error
}

// WriteOperations is what the write tool needs (pi's WriteOperations).
type WriteOperations interface {
	// WriteFile replaces path with everything read from r, atomically: the
	// data goes to a temporary file in the same directory, is synced and
	// renamed over path, so readers see the old or the new content, never
	// a torn file. An existing file keeps its permission bits; a new one
	// gets 0644 (less the umask). If r fails or ctx ends before r is
	// drained, path is left untouched and the error is returned. A missing
	// parent is ErrNotExist, a directory at path ErrIsDir, a denial
	// ErrPermission.
	WriteFile(ctx context.Context, path string, r io.Reader) error
	// Mkdir creates path and any missing parents (mkdir -p); an existing
	// directory is not an error, an existing file at path is ErrExist
	// (ErrNotDir when a parent is a file).
	Mkdir(ctx context.Context, path string) error
}

// EditOperations is what the edit tool needs (pi's EditOperations): read
// the whole file, check access, replace it atomically.
type EditOperations interface {
	Open(ctx context.Context, path string) (io.ReadCloser, error)
	Access(ctx context.Context, path string, mode AccessMode) error
	WriteFile(ctx context.Context, path string, r io.Reader) error
}

// ExecRequest is one command to run.
type ExecRequest struct {
	// Command is a shell command line, run as `bash -c Command`.
	Command string
	// Cwd is the working directory; empty means the workspace root.
	Cwd string
	// Env holds KEY=VALUE pairs added to the backend's minimal base
	// environment (PATH, HOME, LANG, TERM). The broker's own environment
	// is never forwarded.
	Env []string
	// Timeout bounds the command's wall time; zero means none (pi has no
	// default timeout). When it expires the whole process tree is killed.
	Timeout time.Duration
	// Output receives stdout and stderr interleaved, as raw bytes, in the
	// order they were read. Writes are serial and never happen after Exec
	// returns. It may be nil.
	Output io.Writer
	// Stdin, when set, is the command's standard input: what is read from
	// it reaches the command as it comes, and its end (EOF, or any error)
	// closes the command's stdin. nil is /dev/null. Exec does not wait for
	// Stdin to end, but may leave one Read in progress when it returns:
	// the caller unblocks it (closes the reader) once Exec is done.
	Stdin io.Reader
	// Signals, when set, carries signals for the command while it runs:
	// each goes to every process of its tree, as the kill does (a process
	// that left the tree's group or cleared its environment included).
	// Exec stops receiving when it returns; a signal it cannot deliver is
	// dropped, not an error.
	Signals <-chan syscall.Signal
	// Started, when set, is called once the command runs, with a
	// function that measures what its whole tree uses at the moment,
	// where the backend can (it is not called otherwise). It must not
	// block; the function may be called from any goroutine until Exec
	// returns.
	Started func(measure func() Usage)
	// TTY, when set, runs the command on a pseudo-terminal of this size
	// instead of pipes, as a person's shell would: the command leads a
	// session of its own with the terminal as its controlling terminal,
	// what Stdin yields is typed at the terminal (a Ctrl-C, byte 0x03,
	// makes the terminal signal its foreground process group), and
	// Output receives what the terminal displays (stdout and stderr
	// alike, newlines as "\r\n" unless the program changes the mode).
	// The kill, the limits and the 100 ms drain are as without it. A
	// transport without terminals returns ErrUnavailable.
	TTY *TTYSize
	// Resize, with TTY, carries the terminal's new sizes while the
	// command runs (the foreground process group gets SIGWINCH). Exec
	// stops receiving when it returns.
	Resize <-chan TTYSize
}

// TTYSize is a terminal's size in character cells.
type TTYSize struct {
	Rows, Cols uint16
}

// Usage is what a running command's tree uses.
type Usage struct {
	// CPU is the processor time of its live processes, their reaped
	// children's included.
	CPU time.Duration
	// MemoryBytes is the memory it holds (page cache included), 0 when
	// unknown.
	MemoryBytes int64
}

// ExecResult says how a command ended.
type ExecResult struct {
	// ExitCode is the command's exit status; a command ended by signal N
	// reports 128+N, as a shell does.
	ExitCode int `json:"exitCode"`
	// Signal is the name of the signal that ended the command ("SIGKILL"),
	// empty when it exited on its own.
	Signal string `json:"signal,omitempty"`
	// TimedOut is set when the command was killed because Timeout expired.
	TimedOut bool `json:"timedOut,omitempty"`
	// Canceled is set when the command was killed because ctx ended.
	Canceled bool `json:"canceled,omitempty"`
	// OOMKilled is set when the backend saw the kernel's OOM killer end a
	// process of the command.
	OOMKilled bool `json:"oomKilled,omitempty"`
	// MemoryLimit is the memory limit in bytes the command ran under,
	// when the backend knows it (0 otherwise); it lets an OOM kill be
	// reported with the limit that caused it.
	MemoryLimit int64 `json:"memoryLimit,omitempty"`
	// Killed counts the processes the backend killed when the call ended.
	Killed int `json:"killed,omitempty"`
	// Duration is the command's wall time.
	Duration time.Duration `json:"durationNs"`
}

// BashOperations is what the bash tool needs (pi's BashOperations).
type BashOperations interface {
	// Exec runs req in its own process tree and waits for it. A deadline
	// or cancellation is not an error: the tree is killed (SIGTERM, a
	// grace, SIGKILL) and the result has TimedOut or Canceled set. After
	// the shell exits, output is drained until it has been idle for
	// 100 ms, so background children that keep the pipe open neither hang
	// the call nor lose late output; they may keep running, as in pi.
	// Errors are for commands that could not start: a missing Cwd is
	// ErrNotExist, a Cwd outside a confined root ErrPermission, a bad
	// request ErrInvalid, a lost backend ErrUnavailable, as is a Stdin or
	// Signals the backend's transport cannot carry (a fallback without
	// the in-box agent).
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
}

// SearchRequest is a server-side content search, with ripgrep's semantics:
// .gitignore respected, hidden files searched, binary files skipped.
type SearchRequest struct {
	Pattern    string `json:"pattern"`              // regular expression, or text when Literal
	Path       string `json:"path"`                 // file or directory to search
	Glob       string `json:"glob,omitempty"`       // only files matching this glob
	IgnoreCase bool   `json:"ignoreCase,omitempty"` // case-insensitive matching
	Literal    bool   `json:"literal,omitempty"`    // Pattern is a fixed string
	Context    int    `json:"context,omitempty"`    // lines of context around each match
	Limit      int    `json:"limit,omitempty"`      // maximum matches; <= 0 means 100
}

// SearchLine is one line of search output: a match or a context line.
type SearchLine struct {
	// Path is relative to the searched directory with '/' separators, or
	// the file's base name when a single file was searched.
	Path  string `json:"path"`
	Line  int    `json:"line"`  // 1-based line number
	Text  string `json:"text"`  // the line without its line ending; invalid UTF-8 replaced
	Match bool   `json:"match"` // false for a context line
}

// SearchResult is what a search found, in ripgrep's order.
type SearchResult struct {
	Lines []SearchLine `json:"lines"`
	// LimitReached is set when more matches exist than Limit allowed.
	LimitReached bool `json:"limitReached,omitempty"`
	// Hidden counts the matching lines a policy dropped (with their
	// context): those of files the caller may not read.
	Hidden int `json:"hidden,omitempty"`
}

// GrepOperations is what the grep tool needs. pi's GrepOperations has only
// isDirectory and readFile and always runs ripgrep on the host (pi issue
// #9524); here the search runs where the files are.
type GrepOperations interface {
	// Stat describes path, following symlinks: ErrNotExist when missing.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Search runs req. A missing path is ErrNotExist, an invalid pattern
	// ErrInvalid (its message is the engine's), a missing search engine
	// ErrUnavailable.
	Search(ctx context.Context, req SearchRequest) (SearchResult, error)
}

// GlobRequest finds files by glob, with fd's semantics: .gitignore files
// respected at every level (inside a git repository or not), hidden files
// included, a pattern without '/' matching base names at any depth and one
// with '/' matching paths relative to Dir.
type GlobRequest struct {
	Pattern string   `json:"pattern"`
	Dir     string   `json:"cwd"`              // directory searched
	Ignore  []string `json:"ignore,omitempty"` // further globs to exclude, e.g. "**/node_modules/**"
	Limit   int      `json:"limit,omitempty"`  // maximum results; <= 0 means 1000
}

// GlobResult lists the matches.
type GlobResult struct {
	// Paths are relative to Dir with '/' separators; directories end in '/'.
	Paths []string `json:"paths"`
	// LimitReached is set when more matches exist than Limit allowed.
	LimitReached bool `json:"limitReached,omitempty"`
	// Hidden counts the matches a policy dropped: paths the caller may
	// not read.
	Hidden int `json:"hidden,omitempty"`
}

// FindOperations is what the find tool needs (pi's FindOperations).
type FindOperations interface {
	// Stat describes path, following symlinks: ErrNotExist when missing.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Glob runs req. A missing Dir is ErrNotExist, an invalid pattern
	// ErrInvalid, a missing engine ErrUnavailable.
	Glob(ctx context.Context, req GlobRequest) (GlobResult, error)
}

// LsOperations is what the ls tool needs (pi's LsOperations).
type LsOperations interface {
	// Stat describes path, following symlinks: ErrNotExist when missing,
	// ErrPermission outside a confined root.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ReadDir lists path's entries in no particular order, each described
	// as Stat would (so an entry whose link cannot be followed has Type
	// TypeSymlink). A missing path is ErrNotExist, a file ErrNotDir.
	ReadDir(ctx context.Context, path string) ([]FileInfo, error)
}

// Resolver is an optional ability: the canonical form of a path, with
// every symbolic link resolved (realpath). The per-file mutation queue keys
// on it so that aliases of one file share a queue. A missing path is
// ErrNotExist.
type Resolver interface {
	RealPath(ctx context.Context, path string) (string, error)
}

// Workspace is one sandbox. It reports its root; which tools it serves is
// found by type assertion against the Operations interfaces above.
type Workspace interface {
	// Root is the absolute POSIX path that relative paths resolve against.
	Root() string
}

// Operations is everything a full workspace implements: all seven tools.
type Operations interface {
	Workspace
	ReadOperations
	WriteOperations
	BashOperations
	GrepOperations
	FindOperations
	LsOperations
}

// NewFileInfo describes fi under name. symlink records that the path
// itself is a link; fi describes what it resolved to (a link that could
// not be followed keeps its own mode and becomes TypeSymlink).
func NewFileInfo(name string, fi fs.FileInfo, symlink bool) FileInfo {
	t := TypeOther
	switch m := fi.Mode(); {
	case m.IsRegular():
		t = TypeFile
	case m.IsDir():
		t = TypeDir
	case m&fs.ModeSymlink != 0:
		t = TypeSymlink
	}
	return FileInfo{
		Name:    name,
		Type:    t,
		Size:    fi.Size(),
		Mode:    fi.Mode().Perm(),
		ModTime: fi.ModTime(),
		Symlink: symlink,
	}
}
