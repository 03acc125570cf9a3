package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

// maxProblemBytes bounds how much of an error body is read: a problem
// document is small, and a misbehaving proxy's HTML page must not be
// buffered whole.
const maxProblemBytes = 64 << 10

// ToNative turns an error response into a Go error whose kind is the
// opsapi kind named by the problem's code, so errors.Is(err,
// opsapi.ErrNotExist) works across the wire; errors.As with
// **wire.Problem yields the document. A body that is not a problem document is
// classified by its status. ToNative reads at most 64 KiB of the body and
// leaves closing it to the caller. It returns nil for a 2xx response.
func ToNative(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	p := &wire.Problem{Status: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == wire.ProblemMediaType || mt == "application/json" {
		if err := json.Unmarshal(body, p); err != nil {
			p.Detail = fmt.Sprintf("malformed problem document: %v", err)
		}
		if p.Status == 0 {
			p.Status = resp.StatusCode
		}
	} else if len(body) > 0 {
		p.Detail = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, truncate(string(body), 200))
	}
	return native(p)
}

// native maps a problem to an error by wire's one code table: the code's
// opsapi kind, or for a code this client does not know (a newer broker's,
// or none: a proxy's page) the kind of the response's status. ToNative and
// the stream decoders (whose error lines carry a code and a detail) both
// go through it.
func native(p *wire.Problem) error {
	c, ok := wire.ForCode(p.Code)
	if !ok {
		c, _ = wire.ForStatus(p.Status)
	}
	return opsapi.E("broker", "", c.Kind, p)
}

// IsUnauthorized reports whether err is the broker refusing the token.
func IsUnauthorized(err error) bool {
	var p *wire.Problem
	return errors.As(err, &p) && (p.Code == "unauthorized" || p.Status == http.StatusUnauthorized)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
