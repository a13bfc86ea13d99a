package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/logbound"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Defaults of Config.
const (
	DefaultSessionTTL    = 15 * time.Minute
	DefaultSessionMaxAge = 8 * time.Hour
	DefaultMaxSessions   = 1000
	DefaultCallTimeout   = 2 * time.Minute
)

// Input bounds.
const (
	maxBody    = 64 << 10 // a form post
	maxKey     = 512      // an API key pasted at sign-in
	maxField   = 512      // a search field, id or page token (ledger.MaxFieldLength)
	maxNote    = 4 << 10  // a dispute or closing note, in bytes (ledger.MaxNoteLength): 4,096 letters of English, fewer of accented or other scripts
	searchPage = 50       // rows per search page
	// searchEmptyPages is how many pages of ListRows one search page
	// reads while they come back empty with a token (each read its
	// bound of index entries, 10,000, finding no row).
	searchEmptyPages = 4
)

// Cookie names.
const (
	sessionCookie = "pactledger_console"
	signinCookie  = "pactledger_console_signin" // the sign-in form's CSRF token
)

//go:embed assets templates
var files embed.FS

// Config configures the console. Client is required; the zero value of
// everything else means its default.
type Config struct {
	// Client reaches ledgerd's own gRPC server (through its authentication
	// and role interceptors). Every call carries the signed-in key; sign-in
	// asks it (WhoAmI) for the key's name and roles.
	Client ledgerv1.LedgerServiceClient
	// Secure marks the session cookie Secure even when the request did not
	// arrive over TLS here (TLS ends at a proxy in front). A request that
	// arrives over TLS, or says it did with X-Forwarded-Proto: https,
	// always gets a Secure cookie.
	Secure bool
	// Logger receives one record per console action; default: discard.
	Logger *slog.Logger
	// SessionTTL ends a session after this long without a request
	// (default 15 minutes); SessionMaxAge after this long in all (default
	// 8 hours).
	SessionTTL    time.Duration
	SessionMaxAge time.Duration
	// MaxSessions bounds the sessions held in memory (default 1000); when
	// full, the least recently used goes.
	MaxSessions int
	// CallTimeout bounds one call to the ledger API (default 2 minutes: a
	// drill on many rows takes a while).
	CallTimeout time.Duration
	// SigninFailures is how many failed sign-ins (a key the ledger does not
	// know) one client address may make in a row (default 5); after that it
	// gets one attempt every SigninRetryEvery (default 20 s) and is told how
	// long to wait.
	SigninFailures   int
	SigninRetryEvery time.Duration
	// TrustedProxies are the load balancers and proxies in front of
	// ledgerd. A request from one of them is counted against the nearest
	// address in its X-Forwarded-For that is not itself a trusted proxy;
	// any other request against its peer address (X-Forwarded-For is then
	// ignored, so a client cannot choose its own address). Default none.
	TrustedProxies []netip.Prefix
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Identity is what the API says of a key (WhoAmI): its name and roles.
type Identity struct {
	Name  string
	Roles []string
}

// Has reports whether the key holds role.
func (i Identity) Has(role string) bool { return slices.Contains(i.Roles, role) }

// can is what the page offers a key. The API enforces the same table.
type can struct {
	Dispute bool // AppendDisputeEvent: support, admin
	Drill   bool // RunDrill: support, admin
	Close   bool // CloseIncident: admin
}

func (i Identity) can() can {
	staff := i.Has(config.RoleSupport) || i.Has(config.RoleAdmin)
	return can{Dispute: staff, Drill: staff, Close: i.Has(config.RoleAdmin)}
}

// reads reports whether the key may read rows at all.
func (i Identity) reads() bool {
	return i.Has(config.RoleSupport) || i.Has(config.RoleAuditor) || i.Has(config.RoleAdmin)
}

type handler struct {
	cfg   Config
	api   ledgerv1.LedgerServiceClient
	log   *slog.Logger
	sess  *sessions
	limit *signinLimit
	// refused bounds the log lines of refused sign-ins: anyone can post
	// the sign-in form.
	refused *logbound.Limiter
	pages   map[string]*template.Template
	root    http.Handler
}

// New returns the console's handler, to be mounted at Prefix ("/console/")
// on ledgerd's REST listener.
func New(cfg Config) (http.Handler, error) {
	if cfg.Client == nil {
		return nil, errors.New("console: Client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SessionMaxAge <= 0 {
		cfg.SessionMaxAge = DefaultSessionMaxAge
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.SigninFailures <= 0 {
		cfg.SigninFailures = DefaultSigninFailures
	}
	if cfg.SigninRetryEvery <= 0 {
		cfg.SigninRetryEvery = DefaultSigninRetryEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &handler{cfg: cfg, api: cfg.Client, log: cfg.Logger,
		sess:    newSessions(cfg.SessionTTL, cfg.SessionMaxAge, cfg.MaxSessions, cfg.Now),
		limit:   newSigninLimit(cfg.SigninFailures, cfg.SigninRetryEvery, maxLimitedAddrs, cfg.Now),
		refused: logbound.New(refusedBurst, refusedRate)}
	var err error
	if h.pages, err = parsePages(); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", assetServer(assets)))
	mux.HandleFunc("GET /console/{$}", h.home)
	mux.HandleFunc("GET /console/signin", h.signinPage)
	mux.HandleFunc("POST /console/signin", h.signin)
	mux.HandleFunc("POST /console/signout", h.authed(h.signout))
	mux.HandleFunc("GET /console/search", h.authed(h.search))
	mux.HandleFunc("GET /console/rows/{id}", h.authed(h.row))
	mux.HandleFunc("POST /console/rows/{id}/verify", h.authed(h.verify))
	// The address a re-run leaves in the bar, opened again: the row.
	mux.HandleFunc("GET /console/rows/{id}/verify", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"rows/"+url.PathEscape(r.PathValue("id")), http.StatusSeeOther)
	})
	mux.HandleFunc("POST /console/rows/{id}/disputes", h.authed(h.dispute))
	mux.HandleFunc("GET /console/rows/{id}/evidence", h.authed(h.evidence))
	mux.HandleFunc("GET /console/rows/{id}/proof", h.authed(h.proof))
	mux.HandleFunc("GET /console/jwks/{id}", h.authed(h.jwks))
	mux.HandleFunc("GET /console/drill", h.authed(h.drillForm))
	mux.HandleFunc("POST /console/drill", h.authed(h.runDrill))
	mux.HandleFunc("GET /console/drills", h.authed(h.drills))
	mux.HandleFunc("GET /console/drills/{id}", h.authed(h.drillReport))
	mux.HandleFunc("GET /console/grant", h.authed(h.grant))
	mux.HandleFunc("GET /console/grant/export", h.authed(h.grantExport))
	mux.HandleFunc("GET /console/incidents", h.authed(h.incidents))
	mux.HandleFunc("GET /console/incidents/{id}", h.authed(h.incident))
	mux.HandleFunc("POST /console/incidents/{id}/close", h.authed(h.closeIncident))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, nil, http.StatusNotFound, "error", "Not found", errorView{Title: "No such page", Message: "The console has no page at " + r.URL.Path + "."})
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, nil, http.StatusForbidden, "error", "Refused", errorView{Title: "Refused: the form was sent from another site",
			Message: "Nothing was done. Open the console itself and submit the form from there.", Back: Prefix + "search"})
	}))
	h.root = cop.Handler(mux)
	return h, nil
}

// csp is the Content-Security-Policy of every response: nothing inline,
// nothing from elsewhere.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if h.secure(r) {
		// Served over TLS (here or at a proxy): browsers keep to it.
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.ContentLength > maxBody {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	h.root.ServeHTTP(w, r)
}

func assetServer(assets fs.FS) http.Handler {
	fsrv := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		fsrv.ServeHTTP(w, r)
	})
}

// secure reports whether cookies for r must be Secure: configured so, or
// the request came over TLS, here or (as a proxy in front says) before.
// Trusting the header is safe: a Secure cookie is only ever stricter.
func (h *handler) secure(r *http.Request) bool {
	return h.cfg.Secure || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (h *handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode})
}

// session returns r's live session, or nil.
func (h *handler) session(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	return h.sess.get(c.Value)
}

type page func(w http.ResponseWriter, r *http.Request, s *session)

// authed runs p for a signed-in session; a POST must carry the session's
// CSRF token.
func (h *handler) authed(p page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := h.session(r)
		if s == nil {
			// After signing in, back to this page (a form's post: the page
			// it was posted from).
			next := r.URL.RequestURI()
			if r.Method != http.MethodGet {
				next = backFrom(r)
			}
			q := url.Values{}
			if safeNext(next) != "" {
				q.Set("next", next)
			}
			if r.Method != http.MethodGet {
				h.render(w, r, nil, http.StatusUnauthorized, "error", "Signed out", errorView{Title: "Signed out",
					Message: "Your session has ended. Sign in again; nothing was done.", Back: Prefix + "signin?" + q.Encode()})
				return
			}
			if _, err := r.Cookie(sessionCookie); err == nil {
				q.Set("ended", "1")
			}
			target := Prefix + "signin"
			if len(q) > 0 {
				target += "?" + q.Encode()
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				h.render(w, r, s, http.StatusBadRequest, "error", "Bad form", errorView{Title: "Bad form", Message: "The form could not be read."})
				return
			}
			if !sameToken(r.PostForm.Get("csrf"), s.csrf) {
				h.audit(r, s, "refused: no valid CSRF token", errors.New("csrf"), slog.String("path", r.URL.Path))
				h.render(w, r, s, http.StatusForbidden, "error", "Refused", errorView{Title: "Refused: the form's security token is missing or wrong",
					Message: "Nothing was done. Reload the page and submit the form again."})
				return
			}
		}
		p(w, r, s)
	}
}

// call returns a context for one API call on behalf of s: its key as the
// Bearer credential, bounded by the call timeout.
func (h *handler) call(r *http.Request, s *session) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.CallTimeout)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.key), cancel
}

// audit logs one console action with the key's name and its outcome; a
// refusal with no session (a refused sign-in) through the bound of
// refused sign-ins.
func (h *handler) audit(r *http.Request, s *session, action string, err error, attrs ...slog.Attr) {
	as := []slog.Attr{slog.String("action", action)}
	if s != nil {
		as = append(as, slog.String("key", s.who.Name))
	}
	as = append(as, attrs...)
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		as = append(as, slog.String("outcome", outcome(err)))
	} else {
		as = append(as, slog.String("outcome", "ok"))
	}
	if s == nil && err != nil {
		h.refused.Log(r.Context(), h.log, level, "console", as...)
		return
	}
	h.log.LogAttrs(r.Context(), level, "console", as...)
}

// Refused sign-ins are logged at most refusedBurst at once and
// refusedRate a second after that; the next line counts those left out.
const (
	refusedBurst = 10
	refusedRate  = 1.0
)

func (h *handler) home(w http.ResponseWriter, r *http.Request) {
	if h.session(r) == nil {
		http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"search", http.StatusSeeOther)
}

type signinView struct {
	Token   string
	Error   string
	Notice  string
	Example string
	Next    string // the console page to return to once signed in
}

// safeNext is next when it is a page of the console to return to after
// signing in, else "": never another site, and never the sign-in page.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\") ||
		strings.HasPrefix(u.Path, Prefix+"signin") || strings.Contains(u.Path, "/..") {
		return ""
	}
	return next
}

func (h *handler) signinPage(w http.ResponseWriter, r *http.Request) {
	if h.session(r) != nil {
		next := safeNext(r.URL.Query().Get("next"))
		if next == "" {
			next = Prefix + "search"
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	v := signinView{}
	switch {
	case r.URL.Query().Get("ended") != "":
		v.Notice = "Your session ended. Sign in again."
	case r.URL.Query().Get("out") != "":
		v.Notice = "Signed out."
	}
	h.signinForm(w, r, http.StatusOK, v)
}

func (h *handler) signinForm(w http.ResponseWriter, r *http.Request, code int, v signinView) {
	v.Token = randomToken()
	v.Next = safeNext(r.FormValue("next"))
	h.setCookie(w, r, signinCookie, v.Token, 600)
	h.render(w, r, nil, code, "signin", "Sign in", v)
}

func (h *handler) signin(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.signinForm(w, r, http.StatusBadRequest, signinView{Error: "The form could not be read."})
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || !sameToken(c.Value, r.PostForm.Get("csrf")) {
		h.audit(r, nil, "sign-in refused: no valid CSRF token", errors.New("csrf"))
		h.signinForm(w, r, http.StatusForbidden, signinView{Error: "The sign-in form expired or was not sent from this page. Paste the key again."})
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	switch {
	case key == "":
		h.signinForm(w, r, http.StatusBadRequest, signinView{Error: "Paste an API key to sign in."})
		return
	case len(key) > maxKey:
		h.signinForm(w, r, http.StatusBadRequest, signinView{Error: "That is not an API key: it is too long."})
		return
	}
	addr := clientAddr(r, h.cfg.TrustedProxies)
	wait, giveBack := h.limit.attempt(addr)
	if wait > 0 {
		secs := strconv.Itoa(int(wait / time.Second))
		h.audit(r, nil, "sign-in refused: too many failed attempts", errors.New("limit"), slog.String("addr", addr.String()))
		w.Header().Set("Retry-After", secs)
		h.signinForm(w, r, http.StatusTooManyRequests, signinView{Error: "Too many failed sign-in attempts from your address: try again in " + secs + " s. Nothing was checked."})
		return
	}
	// The API names the key and its roles.
	s := &session{key: key}
	ctx, cancel := h.call(r, s)
	defer cancel()
	me, err := h.api.WhoAmI(ctx, &ledgerv1.WhoAmIRequest{})
	if status.Code(err) != codes.Unauthenticated {
		giveBack() // not a failed guess
	}
	switch {
	case status.Code(err) == codes.Unauthenticated:
		h.audit(r, nil, "sign-in refused: unknown key", err, slog.String("addr", addr.String()))
		h.signinForm(w, r, http.StatusUnauthorized, signinView{Error: "This ledger does not know that key. Check that you pasted the whole key, from the right file."})
		return
	case err != nil:
		h.audit(r, nil, "sign-in failed", err)
		h.signinForm(w, r, http.StatusServiceUnavailable, signinView{Error: "The ledger did not answer (" + apiMessage(err) + "). Try again in a moment."})
		return
	}
	who := Identity{Name: me.GetName(), Roles: me.GetRoles()}
	if !who.reads() {
		h.audit(r, nil, "sign-in refused: key cannot read", errors.New("role"), slog.String("key", who.Name))
		h.signinForm(w, r, http.StatusForbidden, signinView{Error: fmt.Sprintf("Key %s has the role %s, which cannot read the ledger. The console needs a support, auditor or admin key.", who.Name, strings.Join(who.Roles, ", "))})
		return
	}
	if old, err := r.Cookie(sessionCookie); err == nil {
		h.sess.end(old.Value) // a new sign-in replaces the browser's session
	}
	s = h.sess.create(key, who)
	h.setCookie(w, r, sessionCookie, s.id, 0)
	h.setCookie(w, r, signinCookie, "", -1)
	h.audit(r, s, "sign in", nil, slog.String("roles", strings.Join(who.Roles, ",")))
	next := safeNext(r.PostForm.Get("next"))
	if next == "" {
		next = Prefix + "search"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *handler) signout(w http.ResponseWriter, r *http.Request, s *session) {
	h.sess.end(s.id)
	h.setCookie(w, r, sessionCookie, "", -1)
	h.audit(r, s, "sign out", nil)
	http.Redirect(w, r, Prefix+"signin?out=1", http.StatusSeeOther)
}
