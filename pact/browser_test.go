package pact

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts headless Chromium for a test. `make test` installs it
// when missing (scripts/ensure-chromium) and sets PACTLEDGER_CHROMIUM, so
// the test cannot be skipped there; a plain `go test` without Chromium
// skips it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("PACTLEDGER_CHROMIUM") != "" {
			t.Fatal("chromium is not installed, but PACTLEDGER_CHROMIUM says it must be")
		}
		t.Skip("chromium is not installed (make test installs it)")
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()))
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel3)
	return ctx
}

// In a real browser, without JavaScript doing any of the work: sign in at
// the Brand, uncheck one scope, allow; the token carries only the scopes
// left checked.
func TestBrowserSignInUncheckApprove(t *testing.T) {
	ctx := browser(t)
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read", "orders:cancel")
	err := chromedp.Do(ctx,
		chromedp.Navigate(da["verification_uri_complete"].(string)),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if err != nil {
		t.Fatal(err)
	}
	code, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("user-code")))
	if err != nil || code != da["user_code"] {
		t.Fatalf("login page shows code %q (%v), want %q", code, err, da["user_code"])
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("email"), janeEmail),
		chromedp.SendKeys(chromedp.ID("password"), janePassword),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("continue")),
		chromedp.Click(chromedp.ID("continue")),
		chromedp.WaitVisible(chromedp.ID("approve")),
	)
	if err != nil {
		t.Fatal(err)
	}
	pa, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("pa-origin")))
	if err != nil || pa != origin(e.sc.PA.ID) {
		t.Fatalf("consent names the agent %q (%v)", pa, err)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("scope-orders-cancel")),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("title")),
	)
	if err != nil {
		t.Fatal(err)
	}
	h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("title")))
	if err != nil || strings.TrimSpace(h1) != "Allowed" {
		t.Fatalf("after approving: %q %v", h1, err)
	}
	status, tok := e.poll(da)
	if status != 200 || tok["scope"] != "orders:read" || claimsOf(t, tok["access_token"].(string)).Scope != "orders:read" {
		t.Fatalf("token: %d %v", status, tok)
	}
}
