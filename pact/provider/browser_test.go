package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pactledger/pactledger/internal/headless"
)

// browser starts headless Chromium for a test (skipped without it,
// except under make test).
func browser(t *testing.T) context.Context { return headless.Browser(t, 60*time.Second) }

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
	if err != nil || pa != originOf(e.sc.PA.ID) {
		t.Fatalf("consent names the agent %q (%v)", pa, err)
	}
	if name, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("pa-name"))); err != nil || name != agentName {
		t.Fatalf("consent names the agent %q (%v), want its registered name %q", name, err, agentName)
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
