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
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact/oauth"
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

// signingKey is the Provider's ES256 key for delegation tokens (and, with
// the Delegated profile, receipts), kept in a file readable only by its
// owner and published in each delegating brand's JWKS, with the keys it
// replaced (keyRing).
type signingKey struct {
	jwk      jose.JSONWebKey
	signer   jose.Signer // delegation tokens: typ at+jwt
	receipts jose.Signer // receipts: typ JWT
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
type keyFile struct {
	Current jose.JSONWebKey `json:"current"`
	Retired []RetiredKey    `json:"retired,omitempty"`
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
// retired.
func (kf keyFile) marshal() ([]byte, error) {
	if len(kf.Retired) == 0 {
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

// createKeyFile writes a new key to path, which must not exist.
func createKeyFile(path string) (jose.JSONWebKey, error) {
	k, err := newES256Key()
	if err != nil {
		return k, err
	}
	out, err := keyFile{Current: k}.marshal()
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
}

// RotateSigningKey makes a new key current in the key file at path and
// retires the current one as of now: it signs no more, and stays
// published for verification for ttl (the retirement period; default
// DefaultRetiredKeyTTL). Retired keys whose period is over leave the file.
// The running Provider reads the file when it starts: rotate with it
// stopped.
func RotateSigningKey(path string, ttl time.Duration, now time.Time) (Rotation, error) {
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
		if now.Before(r.RetiredAt.Add(ttl)) {
			retired = append(retired, r)
		} else {
			rot.Dropped = append(rot.Dropped, r.Key.KeyID)
		}
	}
	if err := replaceKeyFile(path, keyFile{Current: k, Retired: retired}); err != nil {
		return Rotation{}, err
	}
	return rot, nil
}

// ReplaceLostSigningKey writes a new key at path, where there is none:
// what the lost key signed verifies no more.
func ReplaceLostSigningKey(path string) (kid string, err error) {
	k, err := createKeyFile(path)
	return k.KeyID, err
}

// retiredKeyTTL is ttl, or the default for 0.
func retiredKeyTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return DefaultRetiredKeyTTL
	}
	return ttl
}

// keyRing is the Provider's signing key with the retired keys still
// published: what it publishes changes as retirements end.
type keyRing struct {
	*signingKey
	retired []RetiredKey // newest first
	ttl     time.Duration
	path    string
	log     *slog.Logger

	mu  sync.Mutex
	pub *publishedKeys
}

// publishedKeys is the JWKS the Provider publishes from one time on:
// the current key and the retired keys still in their period.
type publishedKeys struct {
	from  time.Time
	until time.Time // when the next retired key drops out; zero: never
	kids  []string
	jwks  []byte
	set   *verifier.KeySet // the delegation tokens' check

	signersOnce sync.Once
	signers     map[string]verifier.Signer
}

// openKeyRing reads the key file at path, creating it on first use. A
// store that holds what a key signed (held names it; "" for nothing)
// gets no new key: the file must be restored or replaced on purpose.
func openKeyRing(path string, ttl time.Duration, now time.Time, held func() (string, error), log *slog.Logger) (*keyRing, error) {
	kf, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		what, herr := held()
		if herr != nil {
			return nil, fmt.Errorf("read the Provider's store: %w", herr)
		}
		if what != "" {
			return nil, fmt.Errorf("%w at %s, and the Provider's store already holds what its key signed (%s): ledgerd makes a key only for a store with none, since the delegation tokens and receipts the lost key signed would no longer verify "+
				"(receipts waiting for the ledger would be recorded UNAUTHORIZED, agents would drop their grants); restore it from the backup of provider-signing-key.json, "+
				"or, if it is lost for good, make a new one on purpose with `ledgerd provider rotate-key --replace-lost` (docs/operations.md, \"The Provider's signing key\")", ErrNoSigningKey, path, what)
		}
		k, cerr := createKeyFile(path)
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
	r := &keyRing{signingKey: sk, retired: retired, ttl: retiredKeyTTL(ttl), path: path, log: log}
	pub, err := r.publish(now)
	if err != nil {
		return nil, err
	}
	r.pub = pub
	log.Info("the Provider signs with its signing key", slog.String("kid", sk.jwk.KeyID), slog.String("key_file", path))
	for _, k := range retired {
		if until := k.RetiredAt.Add(r.ttl); now.Before(until) {
			log.Info("a retired signing key of the Provider stays published for verification", slog.String("kid", k.Key.KeyID),
				slog.Time("retired_at", k.RetiredAt), slog.Time("published_until", until))
		}
	}
	return r, nil
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
	return &signingKey{jwk: k, signer: signer, receipts: receipts}, nil
}

// publish computes what is published at now.
func (r *keyRing) publish(now time.Time) (*publishedKeys, error) {
	p := &publishedKeys{from: now, kids: []string{r.jwk.KeyID}}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{r.jwk.Public()}}
	for _, k := range r.retired {
		until := k.RetiredAt.Add(r.ttl)
		if !now.Before(until) {
			continue
		}
		set.Keys = append(set.Keys, k.Key)
		p.kids = append(p.kids, k.Key.KeyID)
		if p.until.IsZero() || until.Before(p.until) {
			p.until = until
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
// one once a retired key's period has ended (which it logs).
func (r *keyRing) published(now time.Time) *publishedKeys {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pub.until.IsZero() || now.Before(r.pub.until) {
		return r.pub
	}
	p, err := r.publish(now)
	if err != nil { // the keys marshalled and parsed at start
		r.log.Error("the Provider's published keys", slog.String("error", err.Error()))
		return r.pub
	}
	for _, kid := range r.pub.kids {
		if !slices.Contains(p.kids, kid) {
			r.log.Info("a retired signing key of the Provider is no longer published", slog.String("kid", kid), slog.String("key_file", r.path))
		}
	}
	r.pub = p
	return p
}

// signReceipt returns the compact JWS of receipt claims (PACT §5.6), signed
// with the same key as the delegation tokens.
func (k *signingKey) signReceipt(claims any) (string, error) { return compact(k.receipts, claims) }

// sign returns the compact JWS of delegation token claims.
func (k *signingKey) sign(claims any) (string, error) { return compact(k.signer, claims) }

// compact signs the JSON of claims and returns the compact JWS.
func compact(s jose.Signer, claims any) (string, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
