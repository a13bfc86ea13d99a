package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/logbound"
)

// refusalLog writes a warning for each call the authenticator refuses (no
// key, an unknown key, a key without the role), so that a wrong or stolen
// key at work shows in the log as well as in grpc_server_handled_total.
// A flood of refusals must not flood the log: it writes at most
// refusalBurst lines at once and refusalRate a second after that, and the
// next line it writes says how many it left out.
type refusalLog struct {
	log   *slog.Logger
	limit *logbound.Limiter
}

const (
	refusalBurst = 10
	refusalRate  = 1.0 // lines a second, once the burst is spent
)

func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{log: log, limit: logbound.New(refusalBurst, refusalRate)}
}

// note logs the refusal of a call of method made with key ("" for none)
// by who: the key's name when the ledger holds it, else a fingerprint of
// what was sent (never the key itself).
func (r *refusalLog) note(ctx context.Context, method, key, who string, err error) {
	if r == nil {
		return
	}
	ok, dropped := r.limit.Take()
	if !ok {
		return
	}
	if who == "" {
		who = "none"
		if key != "" {
			sum := sha256.Sum256([]byte(key))
			who = "unknown key sha256:" + hex.EncodeToString(sum[:4])
		}
	}
	st := status.Convert(err)
	attrs := []slog.Attr{
		slog.String("rpc", method[strings.LastIndex(method, "/")+1:]),
		slog.String("code", st.Code().String()),
		slog.String("key", who),
		slog.String("from", callerAddr(ctx)),
		slog.String("reason", st.Message()),
	}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("refusals_not_logged", dropped))
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "call refused", attrs...)
}

// callerAddr is the address a call came from: the gRPC peer, else the
// remote address the REST gateway forwarded (the last address of
// X-Forwarded-For: what comes before it is the client's own word); ""
// when neither is known. A gRPC client's own x-forwarded-for is not
// believed.
func callerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	if v := metadata.ValueFromIncomingContext(ctx, "x-forwarded-for"); len(v) > 0 {
		last := v[len(v)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		return strings.TrimSpace(last)
	}
	return ""
}
