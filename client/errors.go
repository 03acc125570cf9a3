package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/wsbroker/wsbroker/opsapi"
)

// maxProblemBytes bounds how much of an error body is read: a problem
// document is small, and a misbehaving proxy's HTML page must not be
// buffered whole.
const maxProblemBytes = 64 << 10

// Problem is an RFC 9457 problem document as the broker sends it.
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Code is the stable error code: an opsapi code ("not_exist", ...) or
	// one of the broker's own (unauthorized, not_found, bad_request,
	// method_not_allowed, unsupported_media_type).
	Code string `json:"code,omitempty"`
}

// Error is the server's detail, which already names the operation and path.
func (p *Problem) Error() string {
	switch {
	case p.Detail != "":
		return p.Detail
	case p.Title != "":
		return p.Title
	case p.Status != 0:
		return fmt.Sprintf("HTTP %d %s", p.Status, http.StatusText(p.Status))
	}
	return "unknown broker error"
}

// ToNative turns an error response into a Go error whose kind is the
// opsapi kind named by the problem's code, so errors.Is(err,
// opsapi.ErrNotExist) works across the wire; errors.As with **Problem
// yields the document. A body that is not a problem document is
// classified by its status. ToNative reads at most 64 KiB of the body and
// leaves closing it to the caller. It returns nil for a 2xx response.
func ToNative(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	p := &Problem{Status: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/problem+json" || mt == "application/json" {
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

// native maps a problem to an error. It is the single code -> kind table on
// the client side; ToNative and the stream decoders (whose error lines
// carry a code and a detail) both go through it.
func native(p *Problem) error {
	kind := opsapi.KindForCode(p.Code)
	if kind == nil {
		switch p.Code {
		case "not_found":
			// An unknown workspace, tool or route: nothing by that name.
			kind = opsapi.ErrNotExist
		case "unauthorized":
			kind = opsapi.ErrPermission
		case "bad_request", "method_not_allowed", "unsupported_media_type":
			kind = opsapi.ErrInvalid
		case "too_many_requests":
			// A tenant's rate or concurrency limit: retryable, like any
			// temporarily unavailable backend.
			kind = opsapi.ErrUnavailable
		case "internal":
		default:
			kind = kindForStatus(p.Status)
		}
	}
	return opsapi.E("broker", "", kind, p)
}

// kindForStatus classifies a response that carries no known code.
func kindForStatus(status int) error {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return opsapi.ErrInvalid
	case http.StatusUnauthorized, http.StatusForbidden:
		return opsapi.ErrPermission
	case http.StatusNotFound:
		return opsapi.ErrNotExist
	case http.StatusConflict:
		return opsapi.ErrExist
	case http.StatusRequestEntityTooLarge:
		return opsapi.ErrTooLarge
	case 499:
		return opsapi.ErrCanceled
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return opsapi.ErrUnavailable
	case http.StatusGatewayTimeout:
		return opsapi.ErrTimeout
	}
	return nil
}

// IsUnauthorized reports whether err is the broker refusing the token.
func IsUnauthorized(err error) bool {
	var p *Problem
	return errors.As(err, &p) && (p.Code == "unauthorized" || p.Status == http.StatusUnauthorized)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
