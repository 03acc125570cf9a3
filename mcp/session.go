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
	ctx    context.Context
	cancel context.CancelFunc
	slot   *sessionSlot
	once   sync.Once
	onEnd  []func()
}

func newSession(r *http.Request) *session {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	slot, _ := r.Context().Value(slotKey{}).(*sessionSlot)
	return &session{ctx: ctx, cancel: cancel, slot: slot}
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
					sess.once.Do(func() { go s.watch(sess, ss) })
				}
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

// watch waits for the session's end (DELETE, idle expiry, a closed
// connection), then cancels its calls, runs its end hooks and gives its
// slot back.
func (s *Server) watch(sess *session, ss *sdk.ServerSession) {
	claimed := sess.slot != nil && sess.slot.claim()
	_ = ss.Wait()
	sess.cancel()
	for _, f := range sess.onEnd {
		f()
	}
	if claimed {
		sess.slot.release()
	}
	s.logger.Info("MCP session ended", "session", ss.ID())
}

// callContext is ctx, also cancelled when the session ends: the SDK
// cancels a call on notifications/cancelled, the session on its end.
func (sess *session) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(sess.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}
