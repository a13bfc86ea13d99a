package brandlogin

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/store"
)

// However many emails fail within a lockout, no more than
// maxTrackedFailures are counted, and the latest are.
func TestLoginFailuresAreBounded(t *testing.T) {
	d, err := newDemoLogin()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	pad := strings.Repeat("x", 300)
	for i := range 3 * maxTrackedFailures {
		d.fail(fmt.Sprintf("%s-%d@example.com", pad, i), now.Add(time.Duration(i)*30*time.Millisecond))
	}
	if n := len(d.failures); n > maxTrackedFailures {
		t.Fatalf("%d emails counted, want at most %d", n, maxTrackedFailures)
	}
	if _, ok := d.failures[fmt.Sprintf("%s-%d@example.com", pad, 3*maxTrackedFailures-1)]; !ok {
		t.Fatal("the latest failure was not counted")
	}
}

// Counts whose lockout has passed are forgotten first; at the bound, the
// oldest of those with the fewest failures goes, lockouts last.
func TestLoginFailuresForgetTheFewestFirst(t *testing.T) {
	d, err := newDemoLogin()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	for i := range MaxLoginFailures {
		d.fail("locked@example.com", now.Add(time.Duration(i)*time.Second))
	}
	d.fail("two@example.com", now)
	d.fail("two@example.com", now)
	d.fail("one@example.com", now)
	for i := range maxTrackedFailures - 3 {
		d.fail(fmt.Sprintf("u%d@example.com", i), now.Add(time.Minute))
	}
	d.fail("new@example.com", now.Add(2*time.Minute))
	if got, want := len(d.failures), maxTrackedFailures; got != want {
		t.Fatalf("%d emails counted, want %d", got, want)
	}
	if !d.locked("locked@example.com", now.Add(2*time.Minute)) {
		t.Fatal("a lockout was forgotten at the bound")
	}
	if _, ok := d.failures["one@example.com"]; ok {
		t.Fatal("the oldest count of one failure was kept at the bound")
	}
	for _, k := range []string{"two@example.com", "new@example.com", "u0@example.com"} {
		if _, ok := d.failures[k]; !ok {
			t.Fatalf("%s forgotten at the bound", k)
		}
	}
	n := 0
	for i := range d.byCount {
		n += d.byCount[i].Len()
	}
	if n != len(d.failures) {
		t.Fatalf("%d counts in the lists, %d by email", n, len(d.failures))
	}

	// Full of lockouts, the oldest goes.
	d, err = newDemoLogin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxTrackedFailures {
		for range MaxLoginFailures {
			d.fail(fmt.Sprintf("l%d@example.com", i), now.Add(time.Duration(i)*time.Millisecond))
		}
	}
	d.fail("new@example.com", now.Add(time.Minute))
	if d.locked("l0@example.com", now.Add(time.Minute)) || !d.locked("l1@example.com", now.Add(time.Minute)) {
		t.Fatal("full of lockouts, the oldest was not the one forgotten")
	}
	if got, want := len(d.failures), maxTrackedFailures; got != want {
		t.Fatalf("%d emails counted, want %d", got, want)
	}
	// Once the lockouts have passed, a new email drops them all.
	d.fail("late@example.com", now.Add(time.Hour))
	if got := len(d.failures); got != 1 {
		t.Fatalf("%d emails counted after every lockout passed, want the new one alone", got)
	}
}

// An email longer than any address is refused as such, before any password
// is checked or a failure counted.
func TestLoginRefusesAnOverlongEmail(t *testing.T) {
	p, brands := demoPages(t, slog.New(slog.DiscardHandler), "shop")
	b := brands["shop"]
	tests := []struct {
		name  string
		email string
		code  int
		error string
	}{
		{"longest accepted", strings.Repeat("a", maxEmailBytes-len("@x.io")) + "@x.io", http.StatusUnauthorized, "do not match"},
		{"one byte longer", strings.Repeat("a", maxEmailBytes+1-len("@x.io")) + "@x.io", http.StatusBadRequest, "too long"},
		{"the whole form", strings.Repeat("a", 15<<10), http.StatusBadRequest, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := postLogin(p, b, tt.email, "wrong")
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.error) {
				t.Fatalf("got %d, want %d with %q", w.Code, tt.code, tt.error)
			}
			if _, counted := p.demo[b.ID].failures[strings.ToLower(tt.email)]; counted != (tt.code == http.StatusUnauthorized) {
				t.Fatalf("failure counted: %v", counted)
			}
		})
	}
}

// The demo logins of every brand share one bound of password checks, at
// most half the cores the process may use: a bound each let a flood of
// sign-ins at several brands take every core. Failed sign-ins, which
// anyone can post, are logged a burst at once and one a second after.
func TestDemoLoginsShareOneBoundOfPasswordChecks(t *testing.T) {
	var logs bytes.Buffer
	p, brands := demoPages(t, slog.New(slog.NewTextHandler(&logs, nil)), "shop", "air", "bank")
	bound := p.demo["shop"].hashing
	for id, d := range p.demo {
		if d.hashing != bound {
			t.Errorf("brand %s checks passwords under a bound of its own", id)
		}
	}
	if want := max(1, runtime.GOMAXPROCS(0)/2); cap(bound) != want {
		t.Errorf("%d password checks at once, want %d", cap(bound), want)
	}
	start := time.Now()
	for i := range 50 {
		postLogin(p, brands["shop"], fmt.Sprintf("u%d@x.io", i), "wrong")
	}
	// The burst, then one line for each second the sign-ins took.
	most := failedBurst + int(time.Since(start)/time.Second) + 1
	if n := strings.Count(logs.String(), "demo brand sign-in failed"); n < 1 || n > most {
		t.Errorf("50 failed sign-ins wrote %d lines, want 1 to %d", n, most)
	}
}

// demoPages is the pages of brands ids, each with a demo login over one
// account, a@x.io with the password "secret", logging to log.
func demoPages(t *testing.T, log *slog.Logger, ids ...string) (*Pages, map[string]*brand.Brand) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	brands := map[string]*brand.Brand{}
	for _, id := range ids {
		brands[id] = &brand.Brand{ID: id, Name: id, Organization: id,
			Accounts: []brand.Account{{ID: "a1", Email: "a@x.io", PasswordHash: string(hash)}}}
	}
	p, err := New(Config{BaseURL: "http://provider.test", Brands: brands, Store: st,
		Issuer: func(id string) string { return "http://provider.test/a2a/" + id + "/oauth" }, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return p, brands
}

// postLogin posts b's demo sign-in form with email and password.
func postLogin(p *Pages, b *brand.Brand, email, password string) *httptest.ResponseRecorder {
	form := url.Values{"csrf": {"tok"}, "email": {email}, "password": {password}}
	r := httptest.NewRequest(http.MethodPost, "/brands/"+b.ID+"/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: loginCSRFCookie, Value: "tok"})
	w := httptest.NewRecorder()
	p.ServeDemo(w, r, b, "login")
	return w
}
