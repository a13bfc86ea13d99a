// Package headless starts headless Chromium for browser tests. `make test`
// installs Chromium when missing (scripts/ensure-chromium) and sets
// PACTLEDGER_CHROMIUM, so a browser test cannot be skipped there; a plain
// `go test` without Chromium skips it and says why.
package headless

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts Chromium for t (loopback only: every other host name
// fails to resolve) and returns a chromedp context that ends after timeout
// or with the test.
func Browser(t testing.TB, timeout time.Duration) context.Context {
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
	ctx, cancel3 := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel3)
	return ctx
}
