package provider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// DefaultRetiredKeyTTL is how long a retired signing key stays published
// by default: long past the life of the delegation tokens it signed
// (oauth.AccessTokenTTL), and long enough for an outbox held up by a
// ledger outage of some days to drain.
const DefaultRetiredKeyTTL = 7 * 24 * time.Hour

// MinRetiredKeyTTL is the shortest retirement: a delegation token's life.
const MinRetiredKeyTTL = oauth.AccessTokenTTL

// ErrNoSigningKey: the signing key file is missing while the Provider's
// store holds what it signed.
var ErrNoSigningKey = errors.New("no Provider signing key")

// ErrKeyFileMismatch: the signing key file lacks a key that signed
// entries waiting for the ledger or set aside in the Provider's store, as
// when the file was restored from an older backup than the store.
var ErrKeyFileMismatch = errors.New("the Provider's signing key file does not go with its store")

// signingKey is the Provider's ES256 key for delegation tokens (and, with
// the Delegated profile, receipts), kept in a file readable only by its
// owner and published in each delegating brand's JWKS, with the keys it
// replaced (keyRing).
type signingKey struct {
	jwk         jose.JSONWebKey
	signer      jose.Signer // delegation tokens: typ at+jwt
	receipts    jose.Signer // receipts: typ JWT
	revocations jose.Signer // revocation statements: typ verifier.RevocationTyp
}

// RetiredKey is a signing key that signs no more: its public key stays
// published, for what it signed to verify, until RetiredAt plus the
// retirement period.
type RetiredKey struct {
	Key       jose.JSONWebKey `json:"key"`
	RetiredAt time.Time       `json:"retiredAt"`
}

// keyFile is the signing key file once a key has been rotated: the
// current key (private) and the retired ones (public). A file with no
// retired key is the current key's JWK alone, as before rotation existed.
// Lost are the kids of a key replaced as lost for good
// (ReplaceLostSigningKey) that signed entries then in the store: the
// Provider starts with those entries, which the ledger will record
// UNAUTHORIZED.
type keyFile struct {
	Current jose.JSONWebKey `json:"current"`
	Retired []RetiredKey    `json:"retired,omitempty"`
	Lost    []string        `json:"lost,omitempty"`
}

// readKeyFile reads the key file at path: the current key and the
// retired ones.
func readKeyFile(path string) (keyFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return keyFile{}, fmt.Errorf("read signing key %s: %w", path, err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return keyFile{}, fmt.Errorf("signing key %s: %w", path, err)
	}
	var kf keyFile
	if _, single := probe["kty"]; single {
		err = kf.Current.UnmarshalJSON(b)
	} else {
		err = json.Unmarshal(b, &kf)
	}
	if err != nil {
		return keyFile{}, fmt.Errorf("signing key %s: %w", path, err)
	}
	if _, ok := kf.Current.Key.(*ecdsa.PrivateKey); !ok {
		return keyFile{}, fmt.Errorf("signing key %s is not an EC private key", path)
	}
	for i, r := range kf.Retired {
		if !r.Key.Valid() || r.RetiredAt.IsZero() {
			return keyFile{}, fmt.Errorf("signing key %s: retired key %d is not a key with its retirement time", path, i)
		}
		kf.Retired[i].Key = r.Key.Public()
	}
	return kf, nil
}

// marshal is the file's bytes: the current key's JWK alone when no key is
// retired or lost.
func (kf keyFile) marshal() ([]byte, error) {
	if len(kf.Retired) == 0 && len(kf.Lost) == 0 {
		return kf.Current.MarshalJSON()
	}
	return json.MarshalIndent(kf, "", "  ")
}

// newES256Key makes an ES256 key with a fresh kid.
func newES256Key() (jose.JSONWebKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	return jose.JSONWebKey{Key: priv, KeyID: "provider-" + hex.EncodeToString(id), Algorithm: string(jose.ES256), Use: "sig"}, nil
}

// createKeyFile writes a new key to path, which must not exist, with the
// kids of a lost key.
func createKeyFile(path string, lost []string) (jose.JSONWebKey, error) {
	k, err := newES256Key()
	if err != nil {
		return k, err
	}
	out, err := keyFile{Current: k, Lost: lost}.marshal()
	if err != nil {
		return k, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return k, fmt.Errorf("create signing key %s: %w", path, err)
	}
	_, err = f.Write(out)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return k, fmt.Errorf("create signing key %s: %w", path, err)
	}
	return k, nil
}

// replaceKeyFile writes kf over the file at path: whole, synced, then
// renamed into place, so a crash leaves the old file or the new one.
func replaceKeyFile(path string, kf keyFile) error {
	out, err := kf.marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".new-*")
	if err != nil {
		return fmt.Errorf("write signing key %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	_, err = f.Write(out)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write signing key %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Rotation is what RotateSigningKey did.
type Rotation struct {
	// Kid is the new current key's.
	Kid string
	// Retired is the kid of the key it replaced ("" when a lost key was
	// replaced), published until PublishedUntil.
	Retired        string
	PublishedUntil time.Time
	// Dropped are the retired keys whose retirement had ended: they left
	// the file.
	Dropped []string
	// Kept are the retired keys whose retirement had ended but that
	// signed entries still waiting for the ledger or set aside: they stay
	// in the file, published until those have reached it.
	Kept []string
	// Lost are the kids of a key replaced as lost that signed entries
	// still held: they stay in the file as lost.
	Lost []string
}

// RotateSigningKey makes a new key current in the key file at path and
// retires the current one as of now: it signs no more, and stays
// published for verification for ttl (the retirement period; default
// DefaultRetiredKeyTTL). Retired keys whose period is over leave the file,
// but those that signed entries held still counts (the store's entries for
// the ledger, store.SignedBy): the Provider publishes them until those
// have reached the ledger. The running Provider reads the file when it
// starts: rotate with it stopped.
func RotateSigningKey(path string, ttl time.Duration, now time.Time, held map[string]store.Held) (Rotation, error) {
	ttl = retiredKeyTTL(ttl)
	kf, err := readKeyFile(path)
	if err != nil {
		return Rotation{}, err
	}
	k, err := newES256Key()
	if err != nil {
		return Rotation{}, err
	}
	rot := Rotation{Kid: k.KeyID, Retired: kf.Current.KeyID, PublishedUntil: now.Add(ttl).UTC()}
	retired := []RetiredKey{{Key: kf.Current.Public(), RetiredAt: now.UTC()}}
	for _, r := range kf.Retired {
		switch {
		case now.Before(r.RetiredAt.Add(ttl)):
			retired = append(retired, r)
		case held[r.Key.KeyID] != (store.Held{}):
			retired = append(retired, r)
			rot.Kept = append(rot.Kept, r.Key.KeyID)
		default:
			rot.Dropped = append(rot.Dropped, r.Key.KeyID)
		}
	}
	for _, kid := range kf.Lost {
		if held[kid] != (store.Held{}) {
			rot.Lost = append(rot.Lost, kid)
		}
	}
	if err := replaceKeyFile(path, keyFile{Current: k, Retired: retired, Lost: rot.Lost}); err != nil {
		return Rotation{}, err
	}
	return rot, nil
}

// ReplaceLostSigningKey writes a new key at path, where there is none:
// what the lost key signed verifies no more. The kids of the entries held
// (store.SignedBy) go in the file as lost, so that the Provider starts
// with those entries (ErrKeyFileMismatch otherwise).
func ReplaceLostSigningKey(path string, held map[string]store.Held) (kid string, err error) {
	lost := slices.Sorted(maps.Keys(held))
	k, err := createKeyFile(path, lost)
	return k.KeyID, err
}

// retiredKeyTTL is ttl, or the default for 0.
func retiredKeyTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return DefaultRetiredKeyTTL
	}
	return ttl
}

// heldKeyRecheck is how often the Provider reads its store again while
// it keeps a retired key published past its period for the entries it
// signed that wait for the ledger: once none is left, the key drops out.
const heldKeyRecheck = 10 * time.Minute

// keyRing is the Provider's signing key with the retired keys still
// published: what it publishes changes as retirements end.
type keyRing struct {
	*signingKey
	retired []RetiredKey     // newest first
	every   *verifier.KeySet // the current key and every retired one in the file, published or not
	ttl     time.Duration
	path    string
	st      *store.Store
	log     *slog.Logger

	mu         sync.Mutex
	pub        *publishedKeys
	refreshing bool // a caller of published is computing the next set
}

// publishedKeys is the JWKS the Provider publishes from one time on:
// the current key and the retired keys still in their period, or past it
// while entries they signed wait for the ledger (held).
type publishedKeys struct {
	from  time.Time
	until time.Time // when to compute the set again; zero: never
	kids  []string
	held  map[string]store.Held // retired keys past their period, by kid
	jwks  []byte
	set   *verifier.KeySet // the delegation tokens' check

	signersOnce sync.Once
	signers     map[string]verifier.Signer
}

// openKeyRing reads the key file at path, creating it on first use. A
// store st that holds what a key signed gets no new key: the file must be
// restored or replaced on purpose. A file that lacks a key which signed
// st's entries for the ledger is refused (ErrKeyFileMismatch). A retired
// key past its period stays published while st's entries for the ledger
// hold what it signed.
func openKeyRing(path string, ttl time.Duration, now time.Time, st *store.Store, log *slog.Logger) (*keyRing, error) {
	kf, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		what, herr := signed(st)
		if herr != nil {
			return nil, fmt.Errorf("read the Provider's store: %w", herr)
		}
		if what != "" {
			return nil, fmt.Errorf("%w at %s, and the Provider's store already holds what its key signed (%s): ledgerd makes a key only for a store with none, since the delegation tokens and receipts the lost key signed would no longer verify "+
				"(receipts waiting for the ledger would be recorded UNAUTHORIZED, agents would drop their grants); restore it from the backup of provider-signing-key.json, "+
				"or, if it is lost for good, make a new one on purpose with `ledgerd provider rotate-key --replace-lost` (docs/operations.md, \"The Provider's signing key\")", ErrNoSigningKey, path, what)
		}
		k, cerr := createKeyFile(path, nil)
		if cerr != nil {
			return nil, cerr
		}
		log.Info("created the Provider's signing key", slog.String("kid", k.KeyID), slog.String("key_file", path))
		kf = keyFile{Current: k}
	} else if err != nil {
		return nil, err
	}
	sk, err := newSigningKey(kf.Current)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	retired := slices.Clone(kf.Retired)
	slices.SortStableFunc(retired, func(a, b RetiredKey) int { return b.RetiredAt.Compare(a.RetiredAt) })
	r := &keyRing{signingKey: sk, retired: retired, ttl: retiredKeyTTL(ttl), path: path, st: st, log: log}
	every := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{kf.Current.Public()}}
	for _, k := range retired {
		every.Keys = append(every.Keys, k.Key)
	}
	if r.every, err = verifier.KeySetOf(path, &every); err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	held, err := st.SignedBy()
	if err != nil {
		return nil, fmt.Errorf("read the Provider's store: %w", err)
	}
	if err := kf.check(path, held, log); err != nil {
		return nil, err
	}
	pub, err := r.publish(now, held)
	if err != nil {
		return nil, err
	}
	r.pub = pub
	log.Info("the Provider signs with its signing key", slog.String("kid", sk.jwk.KeyID), slog.String("key_file", path))
	for _, k := range retired {
		until := k.RetiredAt.Add(r.ttl)
		h, kept := pub.held[k.Key.KeyID]
		switch {
		case now.Before(until):
			log.Info("a retired signing key of the Provider stays published for verification", slog.String("kid", k.Key.KeyID),
				slog.Time("retired_at", k.RetiredAt), slog.Time("published_until", until))
		case kept:
			r.logHeld(k, h)
		default:
			log.Warn("a retired signing key of the Provider is past its period and no longer published: what it signed no longer verifies at the Provider's JWKS", slog.String("kid", k.Key.KeyID),
				slog.Time("retired_at", k.RetiredAt), slog.Time("published_until", until), slog.String("key_file", path))
		}
	}
	return r, nil
}

// check refuses a key file that lacks a key which signed entries held
// (store.SignedBy): neither its current key, nor a retired one, nor one
// replaced as lost. Posted, those entries would be recorded UNAUTHORIZED
// for good ("unknown kid"); the file is most likely older than the store,
// from another backup. It logs, at WARN, the entries a lost key signed.
func (kf keyFile) check(path string, held map[string]store.Held, log *slog.Logger) error {
	var unknown []string
	for _, kid := range slices.Sorted(maps.Keys(held)) {
		switch {
		case kid == kf.Current.KeyID || slices.ContainsFunc(kf.Retired, func(r RetiredKey) bool { return r.Key.KeyID == kid }):
		case slices.Contains(kf.Lost, kid):
			log.Warn("entries signed by a Provider signing key replaced as lost wait for the ledger: it will record them UNAUTHORIZED", slog.String("kid", kid),
				slog.Int("waiting_for_the_ledger", held[kid].Waiting), slog.Int("set_aside", held[kid].SetAside), slog.String("key_file", path))
		default:
			h := held[kid]
			unknown = append(unknown, fmt.Sprintf("%s (%d waiting for the ledger, %d set aside)", kid, h.Waiting, h.SetAside))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the key file %s lacks the keys, neither current nor retired, that signed entries in the Provider's store, by kid: %s. "+
		"Posted, those entries would be recorded UNAUTHORIZED for good (\"unknown kid\"): the key file is most likely older than provider.db, restored from another backup. "+
		"Put back the provider-signing-key.json that goes with provider.db (the copy taken with it, or after its last `ledgerd provider rotate-key`), then start again "+
		"(docs/operations.md, \"Backups\" and \"The Provider's signing key\")", ErrKeyFileMismatch, path, strings.Join(unknown, ", "))
}

// logHeld says, at ERROR, that retired key k is past its period while h
// entries it signed wait: it stays published for them, and what to do.
func (r *keyRing) logHeld(k RetiredKey, h store.Held) {
	r.log.Error("a retired signing key of the Provider is past its period while entries it signed wait for the ledger: it stays published until they have reached it, "+
		"so that the ledger does not record them UNAUTHORIZED (\"unknown kid\"); let the outbox drain (bring the ledger back; look at the entries set aside with `ledgerctl provider outbox` and put them back), "+
		"and raise provider.retiredKeyTTL past the outage and restart to keep the key published on purpose (the period counts from the rotation)",
		slog.String("kid", k.Key.KeyID), slog.Int("waiting_for_the_ledger", h.Waiting), slog.Int("set_aside", h.SetAside),
		slog.Time("retired_at", k.RetiredAt), slog.Time("published_until", k.RetiredAt.Add(r.ttl)), slog.String("key_file", r.path))
}

// signedBy counts the store's entries for the ledger by the key that
// signed them, when a retired key is past its period at now: its fate
// depends on them. Otherwise it reads nothing and returns nil.
func (r *keyRing) signedBy(now time.Time) (map[string]store.Held, error) {
	past := slices.ContainsFunc(r.retired, func(k RetiredKey) bool { return !now.Before(k.RetiredAt.Add(r.ttl)) })
	if !past {
		return nil, nil
	}
	return r.st.SignedBy()
}

// newSigningKey makes the signers of a private key.
func newSigningKey(k jose.JSONWebKey) (*signingKey, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, err
	}
	receipts, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	revocations, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType(verifier.RevocationTyp))
	if err != nil {
		return nil, err
	}
	return &signingKey{jwk: k, signer: signer, receipts: receipts, revocations: revocations}, nil
}

// publish computes what is published at now, given the store's entries
// for the ledger by the key that signed them (held): the current key, the
// retired keys in their period, and those past it that held counts.
func (r *keyRing) publish(now time.Time, held map[string]store.Held) (*publishedKeys, error) {
	p := &publishedKeys{from: now, kids: []string{r.jwk.KeyID}}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{r.jwk.Public()}}
	for _, k := range r.retired {
		next := k.RetiredAt.Add(r.ttl)
		if !now.Before(next) {
			h := held[k.Key.KeyID]
			if h == (store.Held{}) {
				continue
			}
			if p.held == nil {
				p.held = map[string]store.Held{}
			}
			p.held[k.Key.KeyID] = h
			next = now.Add(heldKeyRecheck)
		}
		set.Keys = append(set.Keys, k.Key)
		p.kids = append(p.kids, k.Key.KeyID)
		if p.until.IsZero() || next.Before(p.until) {
			p.until = next
		}
	}
	var err error
	if p.jwks, err = json.Marshal(set); err != nil {
		return nil, err
	}
	if p.set, err = verifier.ParseKeySet(verifier.NewSnapshot(r.path, time.Time{}, p.jwks)); err != nil {
		return nil, fmt.Errorf("signing key %s: %w", r.path, err)
	}
	return p, nil
}

// published is what is published at now: the set computed last, or a new
// one once a retired key's period has ended or the entries holding a key
// past it are due a new count (which it logs). The caller that computes
// the new set reads the store; meanwhile the others get the last one,
// which still publishes every key the new one may drop.
func (r *keyRing) published(now time.Time) *publishedKeys {
	r.mu.Lock()
	cur := r.pub
	if cur.until.IsZero() || now.Before(cur.until) || r.refreshing {
		r.mu.Unlock()
		return cur
	}
	r.refreshing = true
	r.mu.Unlock()

	held, err := r.signedBy(now)
	var p *publishedKeys
	if err == nil {
		p, err = r.publish(now, held)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshing = false
	if err != nil { // the keys marshalled and parsed at start: the store's read failed
		r.log.Error("the Provider's published keys: every key published stays so until it can read its store", slog.String("error", err.Error()))
		cur.until = now.Add(heldKeyRecheck)
		return cur
	}
	for _, k := range r.retired {
		kid := k.Key.KeyID
		if _, was := cur.held[kid]; !was && slices.Contains(cur.kids, kid) {
			if h, kept := p.held[kid]; kept {
				r.logHeld(k, h)
			}
		}
	}
	for _, kid := range cur.kids {
		if !slices.Contains(p.kids, kid) {
			r.log.Info("a retired signing key of the Provider is no longer published", slog.String("kid", kid), slog.String("key_file", r.path))
		}
	}
	r.pub = p
	return p
}

// RetiredKeysHeld is the number of retired signing keys published past
// their period (provider.retiredKeyTTL) because entries they signed still
// wait for the ledger or are set aside: each is logged at ERROR with its
// kid and what to do, and drops out once the entries have reached the
// ledger.
func (s *Server) RetiredKeysHeld() int { return len(s.key.published(s.cfg.Now()).held) }

// signReceipt returns the compact JWS of receipt claims (PACT §5.6), signed
// with the same key as the delegation tokens.
func (k *signingKey) signReceipt(claims any) (string, error) { return compact(k.receipts, claims) }

// signRevocation returns the compact JWS of a revocation statement.
func (k *signingKey) signRevocation(claims verifier.RevocationClaims) (string, error) {
	return compact(k.revocations, claims)
}

// sign returns the compact JWS of delegation token claims.
func (k *signingKey) sign(claims any) (string, error) { return compact(k.signer, claims) }

// compact signs the JSON of claims and returns the compact JWS, its ES256
// signature in the low-s form (s ≤ n/2). Both forms verify; the ledger's
// log hashes a receipt in the low-s form (docs/design/015), and names its
// row by the form posted, which is the form served: so an agent or a
// customer that hashes a receipt as served gets both its row's id and its
// leaf's receipt hash without flipping s first.
func compact(s jose.Signer, claims any) (string, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(b)
	if err != nil {
		return "", err
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		return "", err
	}
	return verifier.Canonical(out), nil
}

// RevocationStatement is the Provider's signed statement that it revoked
// grant id as of at (verifier.RevocationClaims, docs/design/045), which
// its pipeline posts with the revocation: the ledger keeps it, and the
// Provider honours a revocation the ledger holds its statement of, so
// that a copy of its store from before the revocation does not serve
// the grant again. "" when its store holds no such grant or the grant's
// brand no longer delegates: the ledger would not trust the statement,
// and the revocation is posted without one.
func (s *Server) RevocationStatement(id string, at time.Time) (string, error) {
	g, err := s.cfg.Store.Grant(id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	b := s.cfg.Brands[g.Brand]
	if b == nil || !b.Delegation {
		return "", nil
	}
	return s.key.signRevocation(verifier.RevocationClaims{
		Issuer: s.issuer(b), Brand: s.InterfaceURL(b.ID), GrantID: id,
		RevokedAt: at.UTC().Format(time.RFC3339Nano), IssuedAt: s.cfg.Now().Unix(),
	})
}

// Signed reports whether statement is a revocation statement of grant as
// of at that one of the Provider's keys signed: its current key or a
// retired one its key file holds, published or not. It does not depend on
// the brand URL the statement names, which a change of provider.baseUrl
// changes.
func (s *Server) Signed(statement, grant string, at time.Time) bool {
	signed, err := verifier.VerifyCompact(statement, s.key.every, nil, verifier.Expected{Typ: verifier.RevocationTyp})
	if err != nil {
		return false
	}
	var c verifier.RevocationClaims
	if json.Unmarshal(signed.Payload, &c) != nil || c.GrantID != grant {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, c.RevokedAt)
	return err == nil && t.Equal(at)
}
