package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
)

func response(status int, contentType, body string) *http.Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

// toNative runs ToNative on a response made of status, content type and body.
func toNative(status int, contentType, body string) error {
	resp := response(status, contentType, body)
	defer resp.Body.Close()
	return ToNative(resp)
}

func TestToNativeMapsEveryCode(t *testing.T) {
	for _, kind := range opsapi.Kinds {
		code := opsapi.Code(kind)
		body := `{"type":"https://wsbroker.dev/problems/` + code + `","title":"x","status":400,"detail":"op p: boom","code":"` + code + `"}`
		err := toNative(400, "application/problem+json", body)
		if !errors.Is(err, kind) {
			t.Errorf("code %q: errors.Is(%v, %v) = false", code, err, kind)
		}
		var p *wire.Problem
		if !errors.As(err, &p) || p.Detail != "op p: boom" || p.Code != code {
			t.Errorf("code %q: problem not reachable through errors.As: %#v", code, p)
		}
	}
}

func TestToNativeBrokerCodes(t *testing.T) {
	cases := []struct {
		status      int
		contentType string
		body        string
		want        error // nil: no kind
	}{
		{404, "application/problem+json", `{"status":404,"code":"not_found","detail":"workspace ws_x not found"}`, opsapi.ErrNotExist},
		{401, "application/problem+json", `{"status":401,"code":"unauthorized"}`, opsapi.ErrPermission},
		{400, "application/problem+json", `{"status":400,"code":"bad_request","detail":"body: unknown field \"x\""}`, opsapi.ErrInvalid},
		{405, "application/problem+json", `{"status":405,"code":"method_not_allowed"}`, opsapi.ErrInvalid},
		{415, "application/problem+json", `{"status":415,"code":"unsupported_media_type"}`, opsapi.ErrInvalid},
		{500, "application/problem+json", `{"status":500,"code":"internal","detail":"oops"}`, nil},
		{429, "application/problem+json", `{"status":429,"code":"too_many_requests"}`, opsapi.ErrUnavailable},
		{429, "text/plain", `slow down`, opsapi.ErrUnavailable},
		// Not a problem document (a proxy in the way): classified by status.
		{502, "text/html", `<html>bad gateway</html>`, opsapi.ErrUnavailable},
		{404, "", ``, opsapi.ErrNotExist},
		{413, "text/plain", `too big`, opsapi.ErrTooLarge},
	}
	for _, c := range cases {
		err := toNative(c.status, c.contentType, c.body)
		if err == nil {
			t.Fatalf("%d %s: nil error", c.status, c.body)
		}
		got := opsapi.KindOf(err)
		if got != c.want {
			t.Errorf("%d %s: kind %v, want %v (err %v)", c.status, c.body, got, c.want, err)
		}
	}
	if !IsUnauthorized(toNative(401, "application/problem+json", `{"status":401,"code":"unauthorized"}`)) {
		t.Error("IsUnauthorized missed a 401")
	}
}

func TestToNativeSuccessIsNil(t *testing.T) {
	if err := toNative(204, "", ""); err != nil {
		t.Fatalf("204: %v", err)
	}
}

func TestProblemMessageIsDetail(t *testing.T) {
	err := toNative(404, "application/problem+json", `{"status":404,"code":"not_exist","detail":"local.Open a.txt: no such file or directory"}`)
	if got, want := err.Error(), "broker: local.Open a.txt: no such file or directory"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
