package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsbroker/wsbroker/client"
)

const defaultURL = client.DefaultURL

// stateDirName is the broker's directory under $XDG_STATE_HOME.
const stateDirName = "wsbroker"

// defaultStateDir is $BROKER_STATE_DIR, else $XDG_STATE_HOME/wsbroker, else
// ~/.local/state/wsbroker (the XDG base directory default).
func (c *CLI) defaultStateDir() (string, error) {
	if d := c.Getenv("BROKER_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := c.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, stateDirName), nil
	}
	home := c.Getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: set BROKER_STATE_DIR (%w)", err)
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", stateDirName), nil
}

// tokenFileName is the token's file inside the state directory.
const tokenFileName = "token"

// readToken reads a token file; surrounding whitespace is not part of it.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// ensureToken returns the token in path, creating it (random, mode 0600)
// when the file does not exist; created reports that it was made now.
func ensureToken(path string) (tok string, created bool, err error) {
	return ensureRandomFile(path, "", 32)
}

// identityFileName keeps the broker's identity in the state directory
// when the configuration names none.
const identityFileName = "identity"

// ensureIdentity returns the broker identity kept in path, creating one
// ("wsb-" and 12 random hex digits) when the file does not exist.
func ensureIdentity(path string) (string, error) {
	id, _, err := ensureRandomFile(path, "wsb-", 6)
	return id, err
}

// ensureRandomFile returns the value in path, creating it (prefix and n
// random bytes in hex, mode 0600) when the file does not exist; created
// reports that it was made now.
func ensureRandomFile(path, prefix string, n int) (val string, created bool, err error) {
	val, err = readToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return val, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	val = prefix + hex.EncodeToString(b)
	// O_EXCL: two brokers starting at once must not overwrite each other's
	// value; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		val, err = readToken(path)
		return val, false, err
	}
	if err != nil {
		return "", false, err
	}
	if _, err := f.WriteString(val + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", false, err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", false, err
	}
	return val, true, nil
}

// clientFlags are the flags every client subcommand takes.
type clientFlags struct {
	url       string
	tokenFile string
}

func (c *CLI) addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.url, "url", "", "broker URL (default $BROKER_URL or "+defaultURL+")")
	fs.StringVar(&cf.tokenFile, "token-file", "", "file holding the token (default $BROKER_TOKEN_FILE or <state dir>/token; $BROKER_TOKEN wins)")
	return cf
}

// client builds the broker client from flags, environment and the default
// token file.
func (c *CLI) client(cf *clientFlags) (*client.Client, error) {
	url := cf.url
	if url == "" {
		url = c.Getenv("BROKER_URL")
	}
	if url == "" {
		url = defaultURL
	}
	c.brokerURL = url
	tok, err := c.clientToken(cf)
	if err != nil {
		return nil, err
	}
	// No overall timeout: exec and tool calls last as long as they run.
	return client.New(url, tok, client.WithHTTPClient(&http.Client{})), nil
}

func (c *CLI) clientToken(cf *clientFlags) (string, error) {
	if cf.tokenFile == "" {
		if tok := c.Getenv("BROKER_TOKEN"); tok != "" {
			return tok, nil
		}
	}
	path := cf.tokenFile
	if path == "" {
		path = c.Getenv("BROKER_TOKEN_FILE")
	}
	if path == "" {
		dir, err := c.defaultStateDir()
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, tokenFileName)
	}
	tok, err := readToken(path)
	if err != nil {
		return "", fmt.Errorf("no token: set BROKER_TOKEN or point --token-file at the broker's token file "+
			"('broker serve' writes it on its first start) (%w)", err)
	}
	return tok, nil
}

// explain adds a hint to errors a user can fix.
func explain(err error) error {
	if client.IsUnauthorized(err) {
		return fmt.Errorf("%w (check BROKER_TOKEN or the token file)", err)
	}
	return err
}
