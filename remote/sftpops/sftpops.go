package sftpops

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/opsapi"
)

// ClientFunc returns the SFTP client to use now. broken, when not nil, is
// a client the caller found dead (its channel lost): the function must not
// return it again, and should connect anew. An error means no channel can
// be had; it should be (or wrap) opsapi.ErrUnavailable.
type ClientFunc func(ctx context.Context, broken *sftp.Client) (*sftp.Client, error)

// Fixed returns a ClientFunc that always gives c, for a channel that is
// never replaced.
func Fixed(c *sftp.Client) ClientFunc {
	return func(ctx context.Context, broken *sftp.Client) (*sftp.Client, error) {
		if broken == c {
			return nil, opsapi.E("sftp", "", opsapi.ErrUnavailable, errors.New("sftp channel lost"))
		}
		return c, nil
	}
}

// Identity is the remote account's user and group ids; Access checks
// permission bits against it as access(2) would.
type Identity struct {
	UID  int
	GIDs []int // primary group first, then the supplementary ones
}

// Options configure an FS.
type Options struct {
	// Identity is the account the server runs as. Nil means unknown:
	// Access then only checks that the path exists.
	Identity *Identity
	// Logger receives warnings (a server without posix-rename); nil
	// discards them.
	Logger *slog.Logger
	// Op prefixes the operation names in errors, e.g. "ssh" gives
	// "ssh.Open". Default "sftp".
	Op string
	// NoSync skips the fsync of a written file before its rename. The
	// replace stays atomic for every reader; what is lost is the
	// guarantee that a crash of the machine leaves the old or the new
	// content rather than an empty file, for a round trip that costs
	// a journal commit (milliseconds on a busy disk).
	NoSync bool
	// ReadFile, when set, opens a file's bytes as one raw stream (the
	// in-box agent's read), which Open uses for files past the inline
	// size instead of SFTP's packet-by-packet reads. errors.ErrUnsupported
	// sends Open back to SFTP.
	ReadFile func(ctx context.Context, abs string) (io.ReadCloser, error)
	// WriteFile, when set, replaces a file in one round trip with its
	// data as one raw stream (the in-box agent's write, the same rules as
	// the AtomicWrite extension), fsynced when sync is set.
	// errors.ErrUnsupported, answered before r is read, sends WriteFile
	// back to SFTP.
	WriteFile func(ctx context.Context, abs string, r io.Reader, sync bool) error
	// ReadDir, when set, lists a directory in one round trip (the in-box
	// agent's readdir), sorted by name and described as ReadDir does.
	// errors.ErrUnsupported sends ReadDir back to SFTP.
	ReadDir func(ctx context.Context, abs string) ([]opsapi.FileInfo, error)
}

// FS is the file operations of one workspace over SFTP.
type FS struct {
	client ClientFunc
	root   string
	opt    Options
	log    *slog.Logger

	warnedRename atomic.Bool
	oomPath      atomic.Value // string: the OOM counter file that answered

	mu      sync.Mutex
	orphans map[string]struct{} // temporary files left by a lost channel
	// createModes are the modes modeOf's server gives new files, by
	// directory.
	modeOf      *sftp.Client
	createModes map[string]os.FileMode
}

// New returns the operations of a workspace whose root is the absolute
// remote path root.
func New(client ClientFunc, root string, opt Options) *FS {
	if opt.Op == "" {
		opt.Op = "sftp"
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FS{client: client, root: root, opt: opt, log: log, orphans: map[string]struct{}{}}
}

// Root is the workspace root given to New.
func (f *FS) Root() string { return f.root }

// Abs resolves p against the root. A NUL byte is ErrInvalid: the server
// would cut the name there.
func (f *FS) Abs(op, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", opsapi.E(f.op(op), p, opsapi.ErrInvalid, errors.New("NUL byte in path"))
	}
	return opsapi.Resolve(f.root, p), nil
}

func (f *FS) op(name string) string { return f.opt.Op + "." + name }

// with runs fn with a client, waiting for it or for ctx. When idempotent
// and the channel was lost, it runs fn once more on a fresh client.
func (f *FS) with(ctx context.Context, idempotent bool, fn func(c *sftp.Client) error) error {
	_, err := withValue(ctx, f, idempotent, func(c *sftp.Client) (struct{}, error) { return struct{}{}, fn(c) }, nil)
	return err
}

// withValue is with for an fn that yields a value; discard, when not nil,
// releases a value that arrives after ctx ended.
func withValue[T any](ctx context.Context, f *FS, idempotent bool, fn func(c *sftp.Client) (T, error), discard func(T)) (T, error) {
	var broken *sftp.Client
	for attempt := 0; ; attempt++ {
		var zero T
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		c, err := f.client(ctx, broken)
		if err != nil {
			return zero, err
		}
		v, err := waitValue(ctx, func() (T, error) { return fn(c) }, discard)
		if err == nil || !Lost(err) || !idempotent || attempt > 0 {
			return v, err
		}
		broken = c
	}
}

// wait runs fn in its own goroutine and returns its error, or ctx's once
// ctx ends first; fn then finishes in the background.
func wait(ctx context.Context, fn func() error) error {
	_, err := waitValue(ctx, func() (struct{}, error) { return struct{}{}, fn() }, nil)
	return err
}

// waitValue is wait for an fn that yields a value. A value that arrives
// after ctx ended, with no error, is handed to discard (when not nil).
func waitValue[T any](ctx context.Context, fn func() (T, error), discard func(T)) (T, error) {
	if ctx.Done() == nil {
		return fn()
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		if discard != nil {
			go func() {
				if r := <-done; r.err == nil {
					discard(r.v)
				}
			}()
		}
		var zero T
		return zero, ctx.Err()
	}
}

// Lost reports whether err says the SFTP channel (or the connection under
// it) is gone, as opposed to a failed operation.
func Lost(err error) bool {
	if err == nil {
		return false
	}
	var se *sftp.StatusError
	if errors.As(err, &se) {
		return se.Code == codeNoConnection || se.Code == codeConnectionLost
	}
	return errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, sftp.ErrSSHFxNoConnection) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, opsapi.ErrUnavailable)
}

// SFTP status codes (draft-ietf-secsh-filexfer; v3 ends at 8, OpenSSH
// sends only those).
const (
	codeEOF              = 1
	codeNoSuchFile       = 2
	codePermission       = 3
	codeFailure          = 4
	codeBadMessage       = 5
	codeNoConnection     = 6
	codeConnectionLost   = 7
	codeOpUnsupported    = 8
	codeInvalidHandle    = 9
	codeNoSuchPath       = 10
	codeAlreadyExists    = 11
	codeWriteProtect     = 12
	codeNoMedia          = 13
	codeNoSpace          = 14
	codeQuota            = 15
	codeLockConflict     = 17
	codeDirNotEmpty      = 18
	codeNotADirectory    = 19
	codeInvalidFilename  = 20
	codeLinkLoop         = 21
	codeCannotDelete     = 22
	codeInvalidParameter = 23
	codeIsADirectory     = 24
)

// Kind maps an error from pkg/sftp (a status code, a lost channel, an
// os or context error) to an opsapi kind, or nil for a bare "failure".
func Kind(err error) error {
	if err == nil {
		return nil
	}
	var oe *opsapi.Error
	if errors.As(err, &oe) && oe.Kind != nil {
		return oe.Kind
	}
	var se *sftp.StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case codeNoSuchFile, codeNoSuchPath:
			return opsapi.ErrNotExist
		case codePermission, codeWriteProtect, codeLockConflict, codeCannotDelete, codeLinkLoop:
			return opsapi.ErrPermission
		case codeBadMessage, codeOpUnsupported, codeInvalidHandle, codeInvalidFilename, codeInvalidParameter:
			return opsapi.ErrInvalid
		case codeNoConnection, codeConnectionLost, codeNoMedia:
			return opsapi.ErrUnavailable
		case codeAlreadyExists, codeDirNotEmpty:
			return opsapi.ErrExist
		case codeNoSpace, codeQuota:
			return opsapi.ErrTooLarge
		case codeNotADirectory:
			return opsapi.ErrNotDir
		case codeIsADirectory:
			return opsapi.ErrIsDir
		case codeFailure:
			return failureKind(se.Error())
		}
		return nil
	}
	if k := opsapi.Classify(err); k != nil {
		return k
	}
	if Lost(err) {
		return opsapi.ErrUnavailable
	}
	return nil
}

// failureMessages are the strerror texts a server may put in a generic
// "failure" status (pkg/sftp's server does; OpenSSH says "Failure").
var failureMessages = []struct {
	text string
	kind error
}{
	{"not a directory", opsapi.ErrNotDir},
	{"is a directory", opsapi.ErrIsDir},
	{"file exists", opsapi.ErrExist},
	{"directory not empty", opsapi.ErrExist},
	{"no space left", opsapi.ErrTooLarge},
	{"quota exceeded", opsapi.ErrTooLarge},
	{"file too large", opsapi.ErrTooLarge},
	{"read-only file system", opsapi.ErrPermission},
	{"too many levels of symbolic links", opsapi.ErrPermission},
	{"file name too long", opsapi.ErrInvalid},
}

func failureKind(msg string) error {
	msg = strings.ToLower(msg)
	for _, m := range failureMessages {
		if strings.Contains(msg, m.text) {
			return m.kind
		}
	}
	return nil
}

// MapErr wraps err as an *opsapi.Error of op on p with its Kind; an
// error that already is one is returned as it is.
func MapErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var oe *opsapi.Error
	if errors.As(err, &oe) {
		return err
	}
	return opsapi.E(op, p, Kind(err), err)
}

// notExist reports whether err means the path is missing.
func notExist(err error) bool { return Kind(err) == opsapi.ErrNotExist }

// isLink reports whether fi describes a symbolic link.
func isLink(fi os.FileInfo) bool { return fi.Mode()&os.ModeSymlink != 0 }
