package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pactledger/pactledger/pact/agent"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// The OAuth side of the Delegated profile (PACT §5.1, §5.3, §5.4): RFC 8414
// metadata, the JWKS, device authorization (RFC 8628) and the token
// endpoint with rotating refresh tokens. The personal agent's §3 JWT is the
// client authentication on every call. The device authorization's states
// are package oauth's; the store keeps each step atomic.

// oauthError writes an RFC 6749 §5.2 error.
func oauthError(w http.ResponseWriter, code int, e *oauth.Error) {
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func oauthJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// writeOAuthErr answers err: an *oauth.Error as 400, anything else as a
// logged server_error.
func (s *Server) writeOAuthErr(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauth.Error
	if errors.As(err, &oe) {
		oauthError(w, http.StatusBadRequest, oe)
		return
	}
	s.cfg.Logger.ErrorContext(r.Context(), "token endpoint", slog.String("error", err.Error()))
	oauthError(w, http.StatusInternalServerError, oauth.NewError(oauth.ServerError, "internal error"))
}

// metadataURL is where a brand's RFC 8414 metadata is.
func (s *Server) metadataURL(b *brand.Brand) string {
	return s.issuer(b) + "/.well-known/oauth-authorization-server"
}

// clientAuthPAJWT names, in the RFC 8414 metadata's
// token_endpoint_auth_methods_supported, the one client authentication
// the OAuth endpoints accept: the personal agent's PACT §3 JWT as
// Authorization: Bearer (PACT §5). No registered method is that one
// (private_key_jwt, RFC 7523, sends a client_assertion in the body), and
// leaving the field out would mean client_secret_basic (RFC 8414 §2), so
// it is named by an absolute URI, as RFC 7591 §2 allows for a method not
// registered.
const clientAuthPAJWT = "urn:pactledger:oauth:client-auth:pa-jwt-bearer"

// metadata serves brand b's RFC 8414 metadata (PACT §5.1).
func (s *Server) metadata(w http.ResponseWriter, b *brand.Brand) {
	oauthJSON(w, map[string]any{
		"issuer":                                s.issuer(b),
		"device_authorization_endpoint":         s.issuer(b) + "/device_authorization",
		"token_endpoint":                        s.issuer(b) + "/token",
		"jwks_uri":                              s.issuer(b) + "/jwks.json",
		"scopes_supported":                      b.ScopeIDs(),
		"grant_types_supported":                 []string{oauth.DeviceGrantType, "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{clientAuthPAJWT},
		"response_types_supported":              []string{},
	})
}

func (s *Server) jwks(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.key.published(s.cfg.Now()).jwks)
}

// clientForm reads the form and checks client_id against the personal
// agent's JWT (PACT §5.3: client_id is its issuer). It writes the error.
func clientForm(w http.ResponseWriter, r *http.Request, who *verifier.RequestClaims) (url.Values, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, oauth.NewError(oauth.InvalidRequest, "the body is not a form"))
		return nil, false
	}
	if c := r.PostForm.Get("client_id"); c != who.Iss {
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a"`)
		oauthError(w, http.StatusUnauthorized, oauth.NewError(oauth.InvalidClient, "client_id must be the personal agent's issuer"))
		return nil, false
	}
	return r.PostForm, true
}

// deviceAuthorization is RFC 8628 §3.1–3.2.
func (s *Server) deviceAuthorization(w http.ResponseWriter, r *http.Request, rq *request) {
	form, ok := clientForm(w, r, rq.who)
	if !ok {
		return
	}
	scopes, serr := oauth.CardScopes(rq.brand, strings.Fields(form.Get("scope")))
	if serr != nil {
		oauthError(w, http.StatusBadRequest, serr)
		return
	}
	now := s.cfg.Now().UTC()
	deviceCode, userCode, err := s.newDeviceAuthorization(rq, scopes, false, now)
	if limit, ok := errors.AsType[*store.PendingLimitError](err); ok {
		// Too many pending for this (personal agent, sub), or for the
		// personal agent's users together: PACT §6 answers a Provider's
		// limit of a (personal agent, sub) 429 with Retry-After, here
		// when the soonest of those the bound counts expires; the bound
		// of the agent is answered alike. RFC 8628 §3.2 answers errors
		// of this endpoint as the token endpoint does, where slow_down
		// is the device grant's "too quickly".
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(limit.Until.Sub(now).Seconds())))))
		oauthError(w, http.StatusTooManyRequests, oauth.NewError(oauth.SlowDown, limit.Bound.String()+"; wait for one to be answered or to expire"))
		return
	}
	if err != nil {
		s.cfg.Logger.ErrorContext(r.Context(), "device authorization", slog.String("error", err.Error()))
		oauthError(w, http.StatusInternalServerError, oauth.NewError(oauth.ServerError, "could not store the authorization"))
		return
	}
	oauthJSON(w, map[string]any{
		"device_code":               deviceCode,
		"user_code":                 userCode,
		"verification_uri":          s.cfg.Pages.VerificationURI(rq.brand, ""),
		"verification_uri_complete": s.cfg.Pages.VerificationURI(rq.brand, userCode),
		"expires_in":                int(oauth.DeviceCodeTTL / time.Second),
		"interval":                  int(s.cfg.PollInterval / time.Second),
	})
}

// newDeviceAuthorization stores a pending device authorization of the
// request's personal agent and sub for scopes, and returns its device and
// user codes.
func (s *Server) newDeviceAuthorization(rq *request, scopes []string, stepUp bool, now time.Time) (string, string, error) {
	deviceCode := oauth.NewSecret("dc_")
	d := oauth.NewDeviceAuthorization(rq.brand.ID, rq.who.Iss, rq.who.Sub, rq.creds.paJWT, scopes, s.cfg.PollInterval, now)
	if d.StepUp = stepUp; stepUp && rq.del != nil {
		d.Extends = rq.del.GrantID
	}
	d.Open = s.openAgent(rq.who.Iss)
	userCode, err := s.cfg.Store.NewDeviceAuthorization(deviceCode, d, now)
	return deviceCode, userCode, err
}

// openAgent reports whether the personal agent of issuer is one no one
// registered, taken under provider.openAgents: the Keys that know which
// agents are registered (verifier.Registry) say; others register every
// agent they take.
func (s *Server) openAgent(issuer string) bool {
	r, ok := s.cfg.Keys.(interface{ Registered(string) bool })
	return ok && !r.Registered(issuer)
}

// token is the token endpoint: the device code grant (RFC 8628 §3.4–3.5)
// and refresh with rotation and reuse detection. The ledger's revocations
// of the existing grants the request rests on (the refresh token's; for
// an approved device code, the grant it was approved with, if any, and
// the agent's other active grants for the User, whose scopes a new grant
// carries and which it replaces) are read and applied before the code or
// token is spent, so that the store refuses tokens of a grant the ledger
// revoked and a new grant carries nothing of one; when they cannot be
// read the answer is 500 and nothing is spent, and the agent's retry is
// answered as this request would have been, not as a reuse. A grant a
// device code makes when redeemed is new: the ledger holds nothing of it.
// The delegation token is signed and the refresh token made before the
// store commits what the request spends, and stored with it in one
// transaction (store.Issue): a failure spends nothing either.
func (s *Server) token(w http.ResponseWriter, r *http.Request, rq *request) {
	form, ok := clientForm(w, r, rq.who)
	if !ok {
		return
	}
	now := s.cfg.Now().UTC()
	brand, client, sub := rq.brand.ID, rq.who.Iss, rq.who.Sub
	var held []oauth.Grant // the existing grants the request rests on
	var err error
	var issued issuedTokens // what spend issues with what it spends, in one transaction
	var spend func() error
	switch form.Get("grant_type") {
	case oauth.DeviceGrantType:
		code := form.Get("device_code")
		held, err = s.cfg.Store.DeviceCodeGrants(code, brand, client, sub, now)
		spend = func() error {
			checked := make([]string, len(held))
			for i, g := range held {
				checked[i] = g.ID
			}
			_, err := s.cfg.Store.RedeemDeviceCode(code, brand, client, sub, checked, now, s.issue(rq.brand, nil, now, &issued))
			return err
		}
	case "refresh_token":
		token := form.Get("refresh_token")
		asked := strings.Fields(form.Get("scope")) // none: the grant's (RFC 6749 §6)
		var g oauth.Grant
		var found bool
		if g, found, err = s.cfg.Store.RefreshTokenGrant(token, brand, client, sub); found {
			held = []oauth.Grant{g}
		}
		spend = func() error {
			_, err := s.cfg.Store.RotateRefreshToken(token, brand, client, sub, now, s.issue(rq.brand, asked, now, &issued))
			return err
		}
	default:
		oauthError(w, http.StatusBadRequest, oauth.NewError(oauth.UnsupportedGrantType, "use the device code grant or refresh_token"))
		return
	}
	for i := 0; err == nil && i < len(held); i++ {
		_, err = s.ledgerRevoked(r.Context(), held[i])
	}
	if err == nil {
		err = spend()
	}
	if err != nil {
		s.writeOAuthErr(w, r, err)
		return
	}
	issued.write(w)
}

// issuedTokens are the tokens a token request is answered with: the
// delegation token, its claims and the new refresh token.
type issuedTokens struct {
	access  string
	claims  oauth.DelegationClaims
	refresh string
}

// issue is the store.Issue of a token request at brand b at now: it signs
// a delegation token of the grant and makes a new refresh token, kept in
// out for the answer once the store has committed them. The token carries
// the grant's scopes, or of them those asked, when any are (a refresh's
// scope, RFC 6749 §6); asking one the grant does not hold is
// invalid_scope, and spends nothing. The grant and its refresh tokens
// keep every scope.
func (s *Server) issue(b *brand.Brand, asked []string, now time.Time, out *issuedTokens) store.Issue {
	return func(g oauth.Grant) (string, error) {
		scopes := g.Scopes
		if len(asked) > 0 {
			if !g.Covers(asked) {
				return "", oauth.NewError(oauth.InvalidScope, "the scope asked includes one the grant does not hold; ask for some of "+strings.Join(g.Scopes, " "))
			}
			scopes = slices.DeleteFunc(slices.Clone(g.Scopes), func(sc string) bool { return !slices.Contains(asked, sc) })
		}
		jti := make([]byte, 8)
		_, _ = rand.Read(jti)
		claims := oauth.NewDelegationClaims(&g, s.issuer(b), s.InterfaceURL(b.ID), strings.Join(scopes, " "), hex.EncodeToString(jti), now)
		at, err := s.key.sign(claims)
		if err != nil {
			return "", fmt.Errorf("sign delegation token: %w", err)
		}
		*out = issuedTokens{access: at, claims: claims, refresh: oauth.NewSecret("rt_")}
		return out.refresh, nil
	}
}

// write answers the token request with t (RFC 6749 §5.1).
func (t *issuedTokens) write(w http.ResponseWriter) {
	oauthJSON(w, map[string]any{"token_type": "Bearer", "access_token": t.access, "refresh_token": t.refresh,
		"expires_in": int(t.claims.Expiry.Time().Sub(t.claims.IssuedAt.Time()) / time.Second), "scope": t.claims.Scope})
}

// verifyDelegation checks the delegation token of an X-A2A-User-Delegation
// header (PACT §5.5) for a delegating brand, that its grant is that
// brand's and was asked for under the personal-agent JWT's sub (PACT
// §3.2: the agent's User is the pair of the agent and its sub; the
// token's client_id binds the agent alone), and that the grant is still
// active, at the Provider and in the ledger's record (ledgerRevoked).
func (s *Server) verifyDelegation(ctx context.Context, b *brand.Brand, who *verifier.RequestClaims, header string) (*oauth.DelegationClaims, error) {
	tok, ok := bearerToken(header)
	if !ok || !b.Delegation {
		return nil, errors.New("not a bearer delegation token for a delegating brand")
	}
	c, err := oauth.VerifyDelegation(tok, s.key.published(s.cfg.Now()).set, s.issuer(b), s.InterfaceURL(b.ID), who.Iss, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	g, err := s.cfg.Store.Grant(c.GrantID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errors.New("unknown grant")
	}
	if err != nil {
		return nil, err
	}
	// The token's iss and aud are b's, but every brand's tokens carry the
	// Provider's one key: the grant must be b's too.
	if g.Brand != b.ID {
		return nil, fmt.Errorf("delegation token: its grant is of brand %s, not %s", g.Brand, b.ID)
	}
	if !g.HeldBy(b.ID, who.Iss, who.Sub) {
		return nil, errors.New("delegation token: its grant was asked for another user of the personal agent")
	}
	if g, err = s.ledgerRevoked(ctx, g); err != nil {
		return nil, err
	}
	if !g.Active(s.cfg.Now()) {
		return nil, &grantEndedError{claims: c, grant: g}
	}
	return c, nil
}

// ledgerRevokedID is ledgerRevoked for the grant id.
func (s *Server) ledgerRevokedID(ctx context.Context, id string) error {
	g, err := s.cfg.Store.Grant(id)
	if err != nil {
		return err
	}
	_, err = s.ledgerRevoked(ctx, g)
	return err
}

// errRevocationUnread: the ledger's record of the grant's revocation could
// not be read, so the grant is neither accepted nor refused.
var errRevocationUnread = errors.New("the ledger's revocations could not be read")

// ledgerRevoked applies to g the revocation the ledger records for it,
// when one has taken effect (Config.Revocations): the Provider revokes the
// grant as of the ledger's time, with the agent's other grants as a
// User's revocation does (store.RevokeRecorded), and returns it as it now
// stands. A revocation recorded as of a past time stops what comes from
// now on: the Provider cannot take back what it served before it learnt
// of it. An error wraps errRevocationUnread.
func (s *Server) ledgerRevoked(ctx context.Context, g oauth.Grant) (oauth.Grant, error) {
	ng, at, err := brandlogin.LedgerRevoked(ctx, s.cfg.Store, s.cfg.Revocations, g, s.cfg.Now())
	if err != nil {
		return g, fmt.Errorf("%w: grant %s: %w", errRevocationUnread, g.ID, err)
	}
	if !at.IsZero() {
		s.cfg.Logger.InfoContext(ctx, "a grant the ledger records revoked is revoked at the Provider", slog.String("brand", g.Brand), slog.String("grant", g.ID),
			slog.Time("revoked_at", at))
	}
	return ng, nil
}

// grantEndedError: a delegation token that verifies, of a grant revoked or
// expired since it was issued.
type grantEndedError struct {
	claims *oauth.DelegationClaims
	grant  oauth.Grant
}

func (e *grantEndedError) Error() string {
	if !e.grant.Revoked.IsZero() {
		return "the grant is revoked"
	}
	return "the grant has expired"
}

// ended says how and when the grant ended.
func (e *grantEndedError) ended() string { return ended(e.grant) }

// ended says how and when grant g ended: revoked (replaced by a newer
// grant of its agent, or not) or expired.
func ended(g oauth.Grant) string {
	switch {
	case g.ReplacedBy != "":
		return "was revoked at " + g.Revoked.UTC().Format(time.RFC3339) + ", replaced by grant " + g.ReplacedBy
	case !g.Revoked.IsZero():
		return "was revoked at " + g.Revoked.UTC().Format(time.RFC3339)
	}
	return "expired at " + g.Expires.UTC().Format(time.RFC3339)
}

// endedGrantRecordEvery is how often at most an attempt under one ended
// grant is put on record: a personal agent that keeps sending a token of
// a revoked grant (it verifies until it expires, an hour at most) leaves
// a row a minute in the ledger, not one a request.
const endedGrantRecordEvery = time.Minute

// Prune carries out what is due in the store at now, without waiting for
// a write (store.Prune), the times of attempts under ended grants kept
// for endedGrantRecordEvery.
func (s *Server) Prune(ctx context.Context, now time.Time) (store.Pruned, error) {
	return s.cfg.Store.Prune(ctx, now, endedGrantRecordEvery)
}

// recordEndedGrant puts on record, for the ledger, a request refused
// because its delegation token's grant ended: a refusal of the grant's
// Brand user by the personal agent, naming the grant and when it ended.
// It spends from the request's rate limits (the 401 does not depend on
// them), and only a request they admit is recorded, at most one a grant
// per endedGrantRecordEvery, so that no agent fills the outbox.
func (s *Server) recordEndedGrant(r *http.Request, rq *request, op string, e *grantEndedError) {
	now := s.cfg.Now().UTC()
	if _, ok := s.allow(rq.who, now); !ok {
		return
	}
	tool, target := op, rq.arg
	if target != "" {
		// tasks/{id}[...]: the operation with the task id taken out
		// (tasks, tasks:cancel), and the task it names.
		tool = "tasks" + strings.TrimPrefix(op, "tasks/"+target)
	}
	if tool == "" {
		tool = r.Method + " /a2a/" + rq.brand.ID
	}
	under := *rq
	under.del = e.claims // the grant's Brand user is the principal
	it := s.refusal(&under, &agent.Refusal{Tool: tool, Target: target}, "request under delegation grant "+e.grant.ID+
		" (scopes "+strings.Join(e.grant.Scopes, " ")+"), which "+e.ended()+": refused with 401 invalid_token before it ran", now)
	if _, err := s.cfg.Store.RecordEndedGrantAttempt(e.grant.ID, it, endedGrantRecordEvery, now); err != nil {
		s.cfg.Logger.ErrorContext(r.Context(), "provider store: a refusal was not put on record", slog.String("error", err.Error()))
	}
}
