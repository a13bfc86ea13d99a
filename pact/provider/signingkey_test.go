package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
	"github.com/pactledger/pactledger/verifier"
)

// restart makes a new Server over the same store and key file, as a
// restarted ledgerd does, and serves it in place of the running one.
func (e *oauthEnv) restart() {
	e.t.Helper()
	p, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.p = p
	e.live.Store(p)
}

// kids lists the kids of the brand's JWKS, as published now.
func (e *oauthEnv) kids() []string {
	e.t.Helper()
	res, err := http.Get(e.base + "/oauth/jwks.json")
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var set struct{ Keys []struct{ Kid string } }
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		e.t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	return kids
}

// receiptKid is the kid a reply's receipt is signed under.
func receiptKid(t *testing.T, reply map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(reply["message"])
	var m a2a.Message
	_ = json.Unmarshal(b, &m)
	var meta struct {
		Receipt struct{ JWS string } `json:"pact.receipt"`
	}
	if err := json.Unmarshal(m.Metadata, &meta); err != nil || meta.Receipt.JWS == "" {
		t.Fatalf("no receipt in %s", b)
	}
	head, err := base64.RawURLEncoding.DecodeString(strings.Split(meta.Receipt.JWS, ".")[0])
	var h struct{ Kid string }
	if err != nil || json.Unmarshal(head, &h) != nil {
		t.Fatalf("the receipt's header %q: %v", head, err)
	}
	return h.Kid
}

// A rotated key signs no more but stays published for its retirement
// period: a delegation token it signed still works at the Provider, and a
// receipt it signed, which the agent kept, still verifies against the
// brand's JWKS. Once the period is over it leaves the JWKS.
func TestARetiredKeyIsPublishedForItsPeriod(t *testing.T) {
	e := newOAuthEnv(t)
	at := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	c := e.agentClient(e.sc.PA.ID)
	r, err := c.SendDelegated(context.Background(), e.base, "u1", "", "m1", "status of A-5531", at)
	if err != nil || r.Message == nil {
		t.Fatalf("send: %v %+v", err, r)
	}
	old := e.kids()
	if len(old) != 1 {
		t.Fatalf("before the rotation the JWKS lists %v, want one key", old)
	}

	rot, err := RotateSigningKey(e.cfg.SigningKeyPath, 0, e.clock(), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()
	if l := logs.String(); !strings.Contains(l, `"msg":"the Provider signs with its signing key","kid":"`+rot.Kid+`"`) ||
		!strings.Contains(l, `"msg":"a retired signing key of the Provider stays published for verification","kid":"`+old[0]+`"`) || strings.Contains(l, "created") {
		t.Errorf("the restart after the rotation logged:\n%s", l)
	}
	if got := e.kids(); !slices.Equal(got, []string{rot.Kid, old[0]}) || rot.Retired != old[0] {
		t.Fatalf("after the rotation the JWKS lists %v (rotated %+v), want the new key, then the retired %s", got, rot, old[0])
	}
	if !rot.PublishedUntil.Equal(e.clock().Add(DefaultRetiredKeyTTL)) {
		t.Errorf("the retired key is published until %s, want %s", rot.PublishedUntil, e.clock().Add(DefaultRetiredKeyTTL))
	}
	b, err := os.ReadFile(e.cfg.SigningKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), `"d"`) != 1 {
		t.Errorf("the key file keeps %d private keys, want the current one alone", strings.Count(string(b), `"d"`))
	}

	// The token signed before the rotation, sent to the restarted
	// Provider: its reply's receipt is signed by the new key.
	code, out, _ := e.send(at, "", "m2", "status of A-5531")
	if code != http.StatusOK {
		t.Fatalf("the token issued before the rotation: %d %v", code, out)
	}
	if kid := receiptKid(t, out); kid != rot.Kid {
		t.Errorf("a receipt after the rotation is signed under %s, want the new %s", kid, rot.Kid)
	}
	// The receipt the agent kept from before the rotation, checked again
	// by an agent that has not fetched the JWKS yet.
	card, err := c.FetchCard(context.Background(), e.base+"/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	flow, _ := card.Delegation()
	fresh := e.agentClient(e.sc.PA.ID)
	srv, err := fresh.CheckFlow(context.Background(), flow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.VerifyGrantReceipt(context.Background(), srv, e.base, &client.TokenSet{AccessToken: at}, r.Message); err != nil {
		t.Errorf("a receipt kept from before the rotation: %v", err)
	}

	// The ledger takes the receipts that waited, before the period ends.
	if got := e.postOutbox(); len(got) != 2 || got[0] != "AUTHORIZED" || got[1] != "AUTHORIZED" {
		t.Fatalf("the receipts from before and after the rotation, posted: %q", got)
	}
	e.advance(DefaultRetiredKeyTTL - time.Minute)
	if got := e.kids(); !slices.Equal(got, []string{rot.Kid, old[0]}) {
		t.Fatalf("a minute before the retirement ends the JWKS lists %v, want both keys", got)
	}
	if signers := e.p.BrandSigners(); len(signers) != 1 {
		t.Fatalf("brand signers: %v", signers)
	}
	e.advance(time.Minute)
	e.assertDropped(t, "once the retirement is over", rot.Kid, old[0], logs)
	// A later rotation drops it from the file.
	again, err := RotateSigningKey(e.cfg.SigningKeyPath, 0, e.clock(), nil)
	if err != nil || !slices.Equal(again.Dropped, []string{old[0]}) || again.Retired != rot.Kid {
		t.Fatalf("the next rotation: %+v %v, want %s dropped and %s retired", again, err, old[0], rot.Kid)
	}
}

// A key file written before keys rotated (one JWK) is read as the current
// key with none retired, and the file a rotation writes keeps the retired
// key's public part only.
func TestASigningKeyFileOfOneKeyRotates(t *testing.T) {
	e := newOAuthEnv(t)
	b, err := os.ReadFile(e.cfg.SigningKeyPath)
	if err != nil || !strings.Contains(string(b), `"kty":"EC"`) {
		t.Fatalf("a new key file: %s %v", b, err)
	}
	kf, err := readKeyFile(e.cfg.SigningKeyPath)
	if err != nil || len(kf.Retired) != 0 {
		t.Fatalf("read: %+v %v", kf, err)
	}
	if _, err := RotateSigningKey(e.cfg.SigningKeyPath, 0, e.clock(), nil); err != nil {
		t.Fatal(err)
	}
	kf2, err := readKeyFile(e.cfg.SigningKeyPath)
	if err != nil || len(kf2.Retired) != 1 || kf2.Retired[0].Key.KeyID != kf.Current.KeyID || !kf2.Retired[0].Key.IsPublic() {
		t.Fatalf("after a rotation: %+v %v", kf2, err)
	}
	if fi, err := os.Stat(e.cfg.SigningKeyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the rotated key file: %v %v, want mode 0600", fi.Mode(), err)
	}
}

// A new Provider creates its key and logs its kid; a restart reads it and
// creates none.
func TestANewSigningKeyIsLogged(t *testing.T) {
	e := newOAuthEnv(t)
	if err := os.Remove(e.cfg.SigningKeyPath); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()
	kids := e.kids()
	if l := logs.String(); len(kids) != 1 || !strings.Contains(l, `"msg":"created the Provider's signing key","kid":"`+kids[0]+`","key_file":"`+e.cfg.SigningKeyPath+`"`) {
		t.Fatalf("creating the key %v logged:\n%s", kids, l)
	}
	logs = &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()
	if l := logs.String(); strings.Contains(l, "created") || !strings.Contains(l, kids[0]) || !slices.Equal(e.kids(), kids) {
		t.Fatalf("a restart logged:\n%s", l)
	}
}

// A store that holds a grant gets no new key in place of a missing one:
// New refuses, says what to do, and leaves no key file behind.
func TestNoNewKeyOverAStoreWithGrants(t *testing.T) {
	e := newOAuthEnv(t)
	e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	if err := os.Rename(e.cfg.SigningKeyPath, e.cfg.SigningKeyPath+".lost"); err != nil {
		t.Fatal(err)
	}
	_, err := New(e.cfg)
	if !errors.Is(err, ErrNoSigningKey) || !strings.Contains(err.Error(), "grants 1") || !strings.Contains(err.Error(), "restore it from the backup") {
		t.Fatalf("New over a store with a grant and no key: %v", err)
	}
	if _, err := os.Stat(e.cfg.SigningKeyPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refusal left a key file: %v", err)
	}
}

// postOutbox posts what waits in the Provider's outbox, oldest first, to
// a ledger that checks it as the ledger in the same process does: each
// signature the Provider made against the keys of the brand's signer now
// (BrandSigners). It returns each entry's verdict, "AUTHORIZED" or why
// not, and empties the outbox.
// assertDropped checks, when (what has happened), that the JWKS lists the
// current key alone, that the retired key's drop was logged once, and
// that the ledger in the process no longer trusts it.
func (e *oauthEnv) assertDropped(t *testing.T, when, current, retired string, logs *syncbuf.Buffer) {
	t.Helper()
	if got := e.kids(); !slices.Equal(got, []string{current}) {
		t.Fatalf("%s the JWKS lists %v, want the new key alone", when, got)
	}
	if l := logs.String(); strings.Count(l, `"msg":"a retired signing key of the Provider is no longer published","kid":"`+retired+`"`) != 1 {
		t.Errorf("%s, logged:\n%s", when, l)
	}
	for url, s := range e.p.BrandSigners() {
		if strings.Contains(string(s.Keys.Snapshot.Body), retired) {
			t.Errorf("%s the ledger in the process still trusts the retired key for %s", when, url)
		}
	}
}

func (e *oauthEnv) postOutbox() []string {
	e.t.Helper()
	var verdicts []string
	for {
		head, err := e.st.Head(16)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(head) == 0 {
			return verdicts
		}
		for _, en := range head {
			verdict := "AUTHORIZED"
			signer, ok := e.p.BrandSigners()[en.Item.Brand()]
			switch {
			case en.Item.Receipt == nil:
			case !ok:
				verdict = "UNAUTHORIZED: not a trusted brand"
			default:
				for _, tok := range []string{en.Item.Receipt.ReceiptJWS, en.Item.Receipt.DelegationToken} {
					if _, err := verifier.VerifyCompact(tok, signer.Keys, nil, verifier.Expected{}); err != nil {
						verdict = "UNAUTHORIZED: " + err.Error()
					}
				}
			}
			verdicts = append(verdicts, verdict)
			if err := e.st.Remove(en.Seq); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// A receipt signed before a rotation still waits for the ledger when the
// retired key's period ends (a ledger outage longer than the period): the
// key stays published, in the JWKS and for the ledger in the process,
// and the Provider says so at ERROR, when the period ends and at each
// start while the receipt waits; posted then, the receipt lands
// AUTHORIZED. Once the outbox has drained the key drops out, and a start
// after that says, once, that it is no longer published.
func TestARetiredKeyStaysPublishedWhileWhatItSignedWaits(t *testing.T) {
	e := newOAuthEnv(t)
	at := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	if code, out, _ := e.send(at, "", "m1", "status of A-5531"); code != http.StatusOK {
		t.Fatalf("send: %d %v", code, out)
	}
	if d := e.st.Depth(); d != 1 {
		t.Fatalf("the outbox holds %d entries, want the receipt", d)
	}
	old := e.kids()
	rot, err := RotateSigningKey(e.cfg.SigningKeyPath, 0, e.clock(), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()

	held := `"level":"ERROR","msg":"a retired signing key of the Provider is past its period while entries it signed wait for the ledger`
	heldKid := `"kid":"` + old[0] + `","waiting_for_the_ledger":1,"set_aside":0`
	e.advance(DefaultRetiredKeyTTL + time.Minute)
	if got := e.kids(); !slices.Equal(got, []string{rot.Kid, old[0]}) {
		t.Errorf("past the retirement period, with the receipt it signed waiting, the JWKS lists %v, want %v", got, []string{rot.Kid, old[0]})
	}
	e.kids()
	if n := e.p.RetiredKeysHeld(); n != 1 {
		t.Errorf("past the retirement period, with the receipt it signed waiting, %d retired keys are counted as held, want 1", n)
	}
	if l := logs.String(); strings.Count(l, held) != 1 || !strings.Contains(l, heldKid) || !strings.Contains(l, "provider.retiredKeyTTL") || strings.Contains(l, "no longer published") {
		t.Errorf("the end of the period with the receipt waiting logged:\n%s", l)
	}

	logs = &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()
	if l := logs.String(); strings.Count(l, held) != 1 || !strings.Contains(l, heldKid) {
		t.Errorf("a start with the receipt waiting logged:\n%s", l)
	}
	if got := e.postOutbox(); !slices.Equal(got, []string{"AUTHORIZED"}) {
		t.Fatalf("the receipt signed by the retired key, posted past its period: %q", got)
	}

	e.advance(heldKeyRecheck)
	e.assertDropped(t, "once the outbox has drained", rot.Kid, old[0], logs)
	if n := e.p.RetiredKeysHeld(); n != 0 {
		t.Errorf("once the outbox has drained, %d retired keys are counted as held, want 0", n)
	}

	logs = &syncbuf.Buffer{}
	e.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e.restart()
	e.kids()
	if l := logs.String(); strings.Count(l, `"level":"WARN","msg":"a retired signing key of the Provider is past its period and no longer published`) != 1 ||
		!strings.Contains(l, `"kid":"`+old[0]+`"`) || strings.Contains(l, "ERROR") {
		t.Errorf("a start past the period with nothing waiting logged:\n%s", l)
	}
}
