package broker

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/broker/httpguard"
	"github.com/wsbroker/wsbroker/tarball"
	"github.com/wsbroker/wsbroker/wire"
)

// ArchiveReportTrailer carries GET /archive's report, once the tar is
// whole.
const ArchiveReportTrailer = "Wsbroker-Archive-Report"

// archiveBodyLimit bounds a PUT /archive body: the content allowed, plus
// a tar's own blocks (a header, PAX records and padding) for every entry
// allowed.
func (s *Server) archiveBodyLimit() int64 {
	return s.cfg.MaxArchiveBytes + int64(s.cfg.MaxArchiveEntries)*2048
}

func (s *Server) archiveLimits() tarball.Limits {
	return tarball.Limits{MaxEntries: s.cfg.MaxArchiveEntries, MaxBytes: s.cfg.MaxArchiveBytes}
}

func archiveReport(r tarball.Report) wire.ArchiveReport {
	out := wire.ArchiveReport{Files: r.Files, Dirs: r.Dirs, Links: r.Links, Bytes: r.Bytes, Refused: []wire.ArchiveRefusal{}}
	for _, x := range r.Refused {
		out.Refused = append(out.Refused, wire.ArchiveRefusal{Name: x.Name, Reason: x.Reason})
	}
	return out
}

// putArchive lands a tar (gzip and zstd recognised) in the directory
// ?path=, made if missing.
func (res opsResource) putArchive(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "extract")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	c, err := tarball.ParseCompression(r.URL.Query().Get("compression"), tarball.Auto)
	if err != nil {
		writeProblem(w, r, s.logger, invalid("extract", p, "%v", err))
		return
	}
	body := &uploadBody{r: r.Body}
	rep, err := s.svc.Extract(serviceCtx(r), wk, p, body, c, s.archiveLimits())
	if body.overflow != nil {
		err = fmt.Errorf("archive for %s is larger than %d bytes: %w", p, s.archiveBodyLimit(), body.overflow)
	}
	if pb := httpguard.PacerFrom(r.Context()); pb != nil && pb.Slow() != nil {
		err = fmt.Errorf("%w: archive for %s: %w", ErrBadRequest, p, pb.Slow())
	}
	if err != nil {
		s.logger.Info("extraction ended early", "request_id", middleware.GetReqID(r.Context()), "workspace", wk.ID(),
			"files", rep.Files, "dirs", rep.Dirs, "links", rep.Links, "refused", len(rep.Refused), "err", err)
		s.fail(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, archiveReport(rep))
}

// getArchive streams the directory ?path= as a tar, compressed as
// ?compression= (none by default). The report follows in a trailer; a
// failure once the tar has begun breaks the stream, so that no client
// takes a cut archive for a whole one.
func (res opsResource) getArchive(w http.ResponseWriter, r *http.Request) {
	s, wk := res.s, workspaceFrom(r.Context())
	p, err := pathParam(r, "archive")
	if err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	c, err := tarball.ParseCompression(r.URL.Query().Get("compression"), tarball.None)
	if err == nil && c == tarball.Auto {
		err = fmt.Errorf("compression auto is for uploads")
	}
	if err != nil {
		writeProblem(w, r, s.logger, invalid("archive", p, "%v", err))
		return
	}
	out := &lazyStart{w: w, start: func() {
		w.Header().Set("Content-Type", map[tarball.Compression]string{
			tarball.None: "application/x-tar", tarball.Gzip: "application/gzip", tarball.Zstd: "application/zstd"}[c])
		w.Header().Set("Trailer", ArchiveReportTrailer)
		w.WriteHeader(http.StatusOK)
	}}
	rep, err := s.svc.Archive(serviceCtx(r), wk, p, out, c, s.archiveLimits())
	if err != nil {
		if !out.started {
			s.fail(w, r, err)
			return
		}
		s.logger.Warn("archive stream broken", "request_id", middleware.GetReqID(r.Context()), "workspace", wk.ID(), "err", err)
		panic(http.ErrAbortHandler)
	}
	out.begin() // an empty directory is a tar of two zero blocks, already written
	report, _ := json.Marshal(archiveReport(rep))
	w.Header().Set(ArchiveReportTrailer, string(report))
}

// lazyStart sends the response's head at the first byte of the body, so
// that a failure before any (a missing directory) is still a problem.
type lazyStart struct {
	w       http.ResponseWriter
	start   func()
	started bool
}

func (l *lazyStart) begin() {
	if !l.started {
		l.started = true
		l.start()
	}
}

func (l *lazyStart) Write(p []byte) (int, error) {
	l.begin()
	return l.w.Write(p)
}
