package provider

import (
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pactledger/pactledger/internal/logbound"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/verifier"
)

// request is an authenticated A2A request, as its operation sees it.
type request struct {
	brand *brand.Brand
	who   *verifier.RequestClaims
	del   *oauth.DelegationClaims // the verified delegation token, when one was sent
	creds credentials
	arg   string // task id, where the path has one
}

// credentials are the raw tokens of a request, for the ledger.
type credentials struct{ paJWT, delegation string }

// operation serves one A2A (or OAuth) operation of an authenticated
// request.
type operation func(w http.ResponseWriter, r *http.Request, rq *request)

// ServeHTTP routes first (unknown brand or path: 404, wrong method: 405,
// no A2A body), then authenticates, then runs the operation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/.well-known/agent-card.json" {
		if id, ok := s.cfg.Domains[requestHost(r.Host)]; ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.card(w, s.cfg.Brands[id])
			return
		}
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/brands/"); ok {
		id, op, _ := strings.Cut(rest, "/")
		if b := s.cfg.Brands[id]; b != nil && s.cfg.Pages.HasDemo(id) {
			s.cfg.Pages.ServeDemo(w, r, b, op)
			return
		}
		http.NotFound(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/a2a/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	brandID, op, _ := strings.Cut(rest, "/")
	b := s.cfg.Brands[brandID]
	if b == nil {
		http.NotFound(w, r)
		return
	}
	if s.servePublic(w, r, b, op) {
		return
	}
	fn, arg, allowed := s.match(op, r.Method, b.Delegation)
	if fn == nil {
		if allowed != "" {
			methodNotAllowed(w, allowed)
		} else {
			http.NotFound(w, r)
		}
		return
	}
	rq, ok := s.authenticate(w, r, b, op, arg)
	if !ok {
		return
	}
	fn(w, r, rq)
}

// servePublic serves what needs no personal-agent JWT: the card, the OAuth
// metadata and JWKS, and the pages the User's browser posts to. It reports
// whether op was one of them.
func (s *Server) servePublic(w http.ResponseWriter, r *http.Request, b *brand.Brand, op string) bool {
	getOnly := func(serve func()) bool {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
		} else {
			serve()
		}
		return true
	}
	postOnly := func(serve func(http.ResponseWriter, *http.Request, *brand.Brand)) bool {
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
		} else {
			serve(w, r, b)
		}
		return true
	}
	switch {
	case op == ".well-known/agent-card.json":
		return getOnly(func() { s.card(w, b) })
	case !b.Delegation:
		return false
	case op == "oauth/.well-known/oauth-authorization-server":
		return getOnly(func() { s.metadata(w, b) })
	case op == "oauth/jwks.json":
		return getOnly(func() { s.jwks(w) })
	case op == "oauth/consent":
		return postOnly(s.cfg.Pages.Consent)
	case op == "oauth/decision":
		return postOnly(s.cfg.Pages.Decision)
	}
	return false
}

// authenticate checks the personal-agent JWT (PACT §3.4: before the body
// is read), the delegation token when sent (§5.5), and the rate limits
// (§6). It writes the refusal when one fails. op is the operation the
// path names and arg the task id in it, for the record of a request under
// an ended grant.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, b *brand.Brand, op, arg string) (*request, bool) {
	who, err := s.verifyPAJWT(r)
	if errors.Is(err, verifier.ErrUndecided) {
		// The agent's keys could not be fetched: neither accepted nor
		// rejected. A 401 would say its JWT is bad; PACT §6 has a
		// Provider failure answered INTERNAL (500) in the A2A envelope,
		// here with Retry-After, as the agent may retry.
		s.rejected.Log(r.Context(), s.cfg.Logger, slog.LevelWarn, "personal-agent keys unavailable", slog.String("brand", b.ID), slog.String("reason", logbound.Cut(err.Error(), maxLoggedReason)))
		w.Header().Set("Retry-After", "10")
		writeError(w, internalErr("the personal agent's keys could not be fetched; retry"))
		return nil, false
	}
	if err != nil {
		s.rejected.Log(r.Context(), s.cfg.Logger, slog.LevelInfo, "personal-agent JWT rejected", slog.String("brand", b.ID), slog.String("reason", logbound.Cut(err.Error(), maxLoggedReason)))
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a"`)
		w.WriteHeader(http.StatusUnauthorized)
		return nil, false
	}
	rq := &request{brand: b, who: who, arg: arg}
	rq.creds.paJWT, _ = bearerToken(r.Header.Get("Authorization"))
	if h := r.Header.Get("X-A2A-User-Delegation"); h != "" {
		// Kept before the check: a token of an ended grant goes with
		// the refusal that puts the attempt on record.
		rq.creds.delegation, _ = bearerToken(h)
		del, err := s.verifyDelegation(r.Context(), b, who, h)
		if errors.Is(err, errRevocationUnread) {
			// Neither accepted nor refused: answered as unavailable
			// keys are, and the agent may retry.
			s.cfg.Logger.ErrorContext(r.Context(), "delegation token undecided", slog.String("brand", b.ID), slog.String("reason", err.Error()))
			w.Header().Set("Retry-After", "10")
			writeError(w, internalErr("the grant's revocation could not be checked; retry"))
			return nil, false
		}
		if err != nil {
			s.rejected.Log(r.Context(), s.cfg.Logger, slog.LevelInfo, "delegation token rejected", slog.String("brand", b.ID), slog.String("reason", logbound.Cut(err.Error(), maxLoggedReason)))
			if ended, ok := errors.AsType[*grantEndedError](err); ok {
				s.recordEndedGrant(r, rq, op, ended)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="a2a", error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return nil, false
		}
		rq.del = del
	}
	if wait, ok := s.allow(who, s.cfg.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		w.WriteHeader(http.StatusTooManyRequests)
		return nil, false
	}
	return rq, true
}

// allow takes a token from the personal agent's bucket and the (agent,
// sub)'s (PACT §6); a refused request spends neither. It returns how long
// to wait when refused.
func (s *Server) allow(who *verifier.RequestClaims, now time.Time) (time.Duration, bool) {
	okAgent, waitAgent, undoAgent := s.perAgent.allow(who.Iss, now)
	okUser, waitUser := true, time.Duration(0)
	if okAgent {
		okUser, waitUser, _ = s.perUser.allow(who.Iss+"\x00"+who.Sub, now)
		if !okUser {
			undoAgent()
		}
	}
	return max(waitAgent, waitUser), okAgent && okUser
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	w.WriteHeader(http.StatusMethodNotAllowed)
}

// match finds the operation for op and method, and the task id in the
// path. When the path is an A2A operation but the method is not, it
// returns the allowed methods.
func (s *Server) match(op, method string, delegation bool) (operation, string, string) {
	type entry struct {
		method string
		fn     operation
	}
	streaming := unsupported("streaming is not supported (capabilities.streaming is false)")
	var table []entry
	var arg string
	switch {
	case delegation && op == "oauth/device_authorization":
		table = []entry{{http.MethodPost, s.deviceAuthorization}}
	case delegation && op == "oauth/token":
		table = []entry{{http.MethodPost, s.token}}
	case op == "message:send":
		table = []entry{{http.MethodPost, s.send}}
	case op == "message:stream":
		table = []entry{{http.MethodPost, streaming}}
	case op == "tasks":
		table = []entry{{http.MethodGet, listTasks}}
	case op == "extendedAgentCard":
		table = []entry{{http.MethodGet, unsupported("there is no extended agent card (capabilities.extendedAgentCard is false)")}}
	case strings.HasPrefix(op, "tasks/"):
		t := strings.TrimPrefix(op, "tasks/")
		switch {
		case strings.HasSuffix(t, ":cancel") && !strings.Contains(t, "/"):
			arg = strings.TrimSuffix(t, ":cancel")
			table = []entry{{http.MethodPost, taskNotFound}}
		case strings.HasSuffix(t, ":subscribe") && !strings.Contains(t, "/"):
			arg = strings.TrimSuffix(t, ":subscribe")
			table = []entry{{http.MethodPost, streaming}, {http.MethodGet, streaming}}
		case strings.Contains(t, "/pushNotificationConfigs"):
			id, sub, _ := strings.Cut(t, "/pushNotificationConfigs")
			arg = id
			if sub == "" {
				table = []entry{{http.MethodPost, pushNotSupported}, {http.MethodGet, pushNotSupported}}
			} else if strings.HasPrefix(sub, "/") && !strings.Contains(sub[1:], "/") && len(sub) > 1 {
				table = []entry{{http.MethodGet, pushNotSupported}, {http.MethodDelete, pushNotSupported}}
			}
		case t != "" && !strings.ContainsAny(t, "/:"):
			arg = t
			table = []entry{{http.MethodGet, taskNotFound}}
		}
	}
	if arg != "" && strings.ContainsAny(arg, "/:") {
		return nil, "", ""
	}
	var allowed []string
	for _, e := range table {
		if e.method == method {
			return e.fn, arg, ""
		}
		allowed = append(allowed, e.method)
	}
	return nil, "", strings.Join(allowed, ", ")
}

func unsupported(msg string) operation {
	return func(w http.ResponseWriter, _ *http.Request, _ *request) {
		writeError(w, newErr(a2a.ReasonUnsupported, msg))
	}
}

func pushNotSupported(w http.ResponseWriter, _ *http.Request, _ *request) {
	writeError(w, newErr(a2a.ReasonPushNotSupported, "push notifications are not supported (capabilities.pushNotifications is false)"))
}

func taskNotFound(w http.ResponseWriter, _ *http.Request, rq *request) {
	writeError(w, taskErr(rq.arg))
}

func listTasks(w http.ResponseWriter, r *http.Request, _ *request) {
	size := 50
	if v := r.URL.Query().Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, newErr(a2a.ReasonInvalidParams, "pageSize must be between 1 and 100"))
			return
		}
		size = n
	}
	writeA2A(w, http.StatusOK, map[string]any{"tasks": []any{}, "nextPageToken": "", "pageSize": size, "totalSize": 0})
}

// verifyPAJWT verifies the personal-agent JWT of PACT §3.2.
func (s *Server) verifyPAJWT(r *http.Request) (*verifier.RequestClaims, error) {
	tok, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, errors.New("no bearer token")
	}
	// What the ledger would refuse of the JWT a receipt or a refusal
	// carries is refused here, before any turn runs under it.
	if err := ledger.CheckRequestJWT(tok); err != nil {
		return nil, err
	}
	who, err := s.cfg.Verifier.VerifyPAJWT(r.Context(), tok, s.cfg.Now(), s.cfg.Keys)
	if err != nil {
		return nil, err
	}
	if err := ledger.CheckName("the personal agent's iss", who.Iss); err != nil {
		return nil, err
	}
	return who, nil
}

// bearerToken reads the credentials of an Authorization (or
// X-A2A-User-Delegation) header value with the Bearer scheme: the scheme
// name in any case (RFC 9110 §11.1), one or more spaces, then the token
// (RFC 6750 §2.1), with no whitespace inside it.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.Trim(tok, " ")
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", false
	}
	return tok, true
}
