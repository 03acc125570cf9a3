package mcp

import (
	"context"
	"net/http"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is what one MCP session holds: its context, cancelled when the
// session ends (which cancels every call still running in it), and what
// runs then.
type session struct {
	userID string // the tenant and endpoint that opened it
	ctx    context.Context
	cancel context.CancelFunc
	slot   *sessionSlot
	once   sync.Once
	onEnd  []func()
	// workspaceTools names the tools that run in a workspace (and record
	// their own refusal), set before the session serves calls.
	workspaceTools map[string]bool
}

func newSession(r *http.Request) *session {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	slot, _ := r.Context().Value(slotKey{}).(*sessionSlot)
	userID := ""
	if ti := tokenInfo(r); ti != nil {
		userID = ti.UserID
	}
	return &session{userID: userID, ctx: ctx, cancel: cancel, slot: slot, workspaceTools: map[string]bool{}}
}

// newSDKServer builds the SDK server of one session: each session gets
// its own, bound to what it serves. At initialize, the session claims its
// slot under the tenant's cap and starts watching for its end.
func (s *Server) newSDKServer(sess *session, instructions string) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: serverName, Version: s.version},
		&sdk.ServerOptions{Logger: s.logger, Instructions: instructions})
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "initialize" {
				if ss, ok := req.GetSession().(*sdk.ServerSession); ok {
					sess.once.Do(func() {
						claimed := sess.slot != nil && sess.slot.claim()
						s.live.add(ss.ID(), sess)
						go s.watch(sess, ss, claimed)
					})
				}
			}
			return next(ctx, method, req)
		}
	}, s.limitCalls(sess))
	return srv
}

// watch waits for the session's end (DELETE, idle expiry, a closed
// connection), then cancels its calls, runs its end hooks and gives its
// slot back.
func (s *Server) watch(sess *session, ss *sdk.ServerSession, claimed bool) {
	_ = ss.Wait()
	s.live.remove(ss.ID())
	sess.cancel()
	for _, f := range sess.onEnd {
		f()
	}
	if claimed {
		sess.slot.release()
	}
	s.logger.Info("MCP session ended", "session", ss.ID())
}

// liveSessions are the initialized sessions by id, so that a DELETE
// cancels a session's calls at once: the SDK closes a session only after
// its running calls return.
type liveSessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func (l *liveSessions) add(id string, sess *session) {
	l.mu.Lock()
	l.m[id] = sess
	l.mu.Unlock()
}

func (l *liveSessions) remove(id string) {
	l.mu.Lock()
	delete(l.m, id)
	l.mu.Unlock()
}

// foreign reports whether session id is live and opened by another
// userID (another tenant, or another endpoint).
func (l *liveSessions) foreign(id, userID string) bool {
	l.mu.Lock()
	sess, ok := l.m[id]
	l.mu.Unlock()
	return ok && sess.userID != userID
}

// end cancels the calls of session id if userID opened it.
func (l *liveSessions) end(id, userID string) {
	l.mu.Lock()
	sess, ok := l.m[id]
	l.mu.Unlock()
	if ok && sess.userID == userID {
		sess.cancel()
	}
}
