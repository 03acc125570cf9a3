package wire

import (
	"fmt"
	"net/http"
)

// ProblemTypeBase prefixes a code to form a problem's RFC 9457 type URI.
const ProblemTypeBase = "https://wsbroker.dev/problems/"

// ProblemMediaType is the media type of every error response.
const ProblemMediaType = "application/problem+json"

// Problem is the RFC 9457 body of every error response.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is the stable error code, one of Codes.
	Code string `json:"code"`
}

// NewProblem builds the problem document for a non-nil err.
func NewProblem(err error) Problem {
	c := CodeOf(err)
	title := http.StatusText(c.Status)
	if c.Status == StatusClientClosedRequest {
		title = "Client Closed Request"
	}
	return Problem{
		Type:   ProblemTypeBase + c.Name,
		Title:  title,
		Status: c.Status,
		Detail: err.Error(),
		Code:   c.Name,
	}
}

// Error is the server's detail, which already names the operation and
// path; a client wraps the document as the cause of its error.
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
