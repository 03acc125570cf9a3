package broker

import (
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
)

// opsResource serves the per-operation routes of one workspace.
type opsResource struct{ s *Server }

// Routes returns the operation routes: files, stat, realpath, dirs, glob,
// search and exec.
func (res opsResource) Routes() chi.Router {
	s := res.s
	r := chi.NewRouter()
	r.Get("/files", res.getFile)
	r.With(s.limitBody(s.cfg.MaxUploadBytes)).Put("/files", res.putFile)
	r.Get("/stat", res.stat)
	r.Get("/realpath", res.realpath)
	r.Get("/dirs", res.readDir)
	r.Post("/dirs", res.mkdir)
	r.With(s.limitBody(s.archiveBodyLimit())).Put("/archive", res.putArchive)
	r.Get("/archive", res.getArchive)
	r.Group(func(r chi.Router) {
		r.Use(s.limitBody(s.cfg.MaxJSONBody), s.requireJSON)
		r.Post("/glob", res.glob)
		r.Post("/search", res.search)
	})
	r.Post("/exec", res.execRoute())
	r.Get("/exec/tty", res.execTTY)
	return r
}

// pathParam returns the one "path" query parameter. A missing parameter
// or a NUL byte is invalid; an empty value is passed on as it is.
func pathParam(r *http.Request, op string) (string, error) {
	vals, ok := r.URL.Query()["path"]
	switch {
	case !ok:
		return "", invalid(op, "", "missing query parameter \"path\"")
	case len(vals) > 1:
		return "", invalid(op, "", "query parameter \"path\" given %d times", len(vals))
	case strings.IndexByte(vals[0], 0) >= 0:
		return "", invalid(op, "", "query parameter \"path\" contains a NUL byte")
	}
	return vals[0], nil
}

// boolParam parses an optional boolean query parameter: 1/true or 0/false.
func boolParam(r *http.Request, name, op string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, invalid(op, "", "query parameter %q must be 1, true, 0 or false, got %q", name, v)
	}
}

// noNUL refuses a NUL byte in a named field: no path or argument can
// carry one, and a backend might cut the string there.
func noNUL(op string, fields map[string]string) error {
	for _, name := range sortedKeys(fields) {
		if strings.IndexByte(fields[name], 0) >= 0 {
			return invalid(op, "", "field %q contains a NUL byte", name)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
