package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
)

// How long device authorizations are kept. Each is indexed twice when it
// is stored:
//
//   - in bDeviceDue, by the times something is due: when its code expires
//     (dueExpired: the agent's request JWT, kept for a refusal should the
//     User deny, is dropped) and oauth.DeviceCodeKept later (dueDelete:
//     the authorization and its user code are deleted). Each new device
//     authorization first carries out at most devicePruneBatch of what is
//     due, oldest first, as does each batch of Prune: the work of a
//     transaction stays bounded, and the backlog shrinks faster than it
//     grows, whether new authorizations come or not.
//   - in bDevicePending, while it is pending and asked by the agent (not a
//     step-up), by its agent and sub and then its expiry, so that the ones
//     pending for a sub are counted without reading any other's
//     (oauth.MaxPending), and in bDevicePendingAgent by its agent alone
//     and then its expiry, with the size of the request JWT it keeps, so
//     that the ones pending for the agent's users together are counted
//     and weighed (oauth.MaxPendingPerAgent,
//     oauth.MaxPendingBytesPerAgent). One asked by an agent no one
//     registered (Open) is also kept in bDevicePendingOpen by its brand
//     and then its expiry, with the size of its request JWT, and counted
//     and weighed in bDevicePendingOpenSum under its brand, so that the
//     open agents' at a brand are bounded together
//     (oauth.MaxPendingOpenPerBrand, oauth.MaxPendingOpenBytesPerBrand)
//     without reading them. The User's decision, or its expiry, removes
//     the entries and takes it off the sum.
//
// A step-up is also kept in bStepUps under what it asks (stepUpKey), so
// that a turn that needs what an open step-up already asks gets that
// step-up's link again rather than a new authorization: an agent that
// sends turn after turn needing a scope it lacks leaves one step-up
// pending, not one a turn. Its deletion removes the entry.
var (
	bDeviceDue            = []byte("device_due")              // due time | kind | device key: nothing
	bDevicePending        = []byte("device_pending")          // agentKey | expiry | device key: nothing
	bDevicePendingAgent   = []byte("device_pending_agent")    // clientKey | expiry | device key: request JWT bytes
	bDevicePendingOpen    = []byte("device_pending_open")     // brandKey | expiry | device key: request JWT bytes
	bDevicePendingOpenSum = []byte("device_pending_open_sum") // brandKey: count | request JWT bytes
	bStepUps              = []byte("device_stepups")          // stepUpKey: device key
)

// stepUpKey keys a step-up in bStepUps by what it asks: the brand, the
// personal agent's sub, the grant it extends and the scopes.
func stepUpKey(d *oauth.DeviceAuthorization) []byte {
	scopes := slices.Sorted(slices.Values(d.Scopes))
	var b []byte
	for _, f := range append([]string{d.Brand, d.Client, d.Sub, d.Extends}, scopes...) {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return hash(string(b))
}

// openStepUp returns the user code of a step-up still pending that asks
// what d asks, and whose code lasts at least half its time from now, so
// that the User has time to follow its link; "" when there is none.
func openStepUp(tx *bolt.Tx, d *oauth.DeviceAuthorization, now time.Time) (string, error) {
	key := tx.Bucket(bStepUps).Get(stepUpKey(d))
	if key == nil {
		return "", nil
	}
	var open oauth.DeviceAuthorization
	found, err := get(tx, bDevices, key, &open)
	if err != nil || !found || !open.StepUp || open.StateAt(now) != oauth.Pending || open.Expires.Sub(now) < oauth.DeviceCodeTTL/2 {
		return "", err
	}
	return open.UserCode, nil
}

// What is due for a device authorization (bDeviceDue).
const (
	dueExpired byte = 'e'
	dueDelete  byte = 'x'
)

// devicePruneBatch is how many due entries a transaction carries out at
// most.
const devicePruneBatch = 256

// ErrTooManyPending: the personal agent has as many device
// authorizations pending as it may (PendingLimitError says which bound).
var ErrTooManyPending = errors.New("too many device authorizations pending for the personal agent")

// PendingBound names a bound on the device authorizations a personal
// agent may have pending.
type PendingBound int

// The bounds on pending device authorizations.
const (
	// PendingPerSub: oauth.MaxPending for one sub of the agent.
	PendingPerSub PendingBound = iota
	// PendingPerAgent: oauth.MaxPendingPerAgent for all its subs.
	PendingPerAgent
	// PendingBytesPerAgent: oauth.MaxPendingBytesPerAgent of request
	// JWTs kept for all its subs.
	PendingBytesPerAgent
	// PendingOpenPerBrand: oauth.MaxPendingOpenPerBrand for the agents
	// no one registered at the brand, together.
	PendingOpenPerBrand
	// PendingOpenBytesPerBrand: oauth.MaxPendingOpenBytesPerBrand of
	// request JWTs kept for them.
	PendingOpenBytesPerBrand
)

// String says what the bound is, for errors and answers.
func (b PendingBound) String() string {
	switch b {
	case PendingPerAgent:
		return fmt.Sprintf("%d device authorizations are pending for the personal agent's users together", oauth.MaxPendingPerAgent)
	case PendingBytesPerAgent:
		return fmt.Sprintf("the device authorizations pending for the personal agent's users together keep up to %d MiB of request JWTs", oauth.MaxPendingBytesPerAgent>>20)
	case PendingOpenPerBrand:
		return fmt.Sprintf("%d device authorizations are pending at this brand for personal agents it has not registered, together", oauth.MaxPendingOpenPerBrand)
	case PendingOpenBytesPerBrand:
		return fmt.Sprintf("the device authorizations pending at this brand for personal agents it has not registered keep up to %d MiB of request JWTs together", oauth.MaxPendingOpenBytesPerBrand>>20)
	}
	return fmt.Sprintf("%d device authorizations are pending for this user of the personal agent", oauth.MaxPending)
}

// PendingLimitError is ErrTooManyPending, with the bound met and when the
// soonest of the pending authorizations it counts expires, freeing a
// place if none is answered before.
type PendingLimitError struct {
	Bound PendingBound
	Until time.Time
}

func (e *PendingLimitError) Error() string {
	return fmt.Sprintf("%s: %s; the soonest expires at %s", ErrTooManyPending, e.Bound, e.Until.UTC().Format(time.RFC3339))
}

// Unwrap returns ErrTooManyPending.
func (e *PendingLimitError) Unwrap() error { return ErrTooManyPending }

// timeKey is t as an index key's sortable prefix.
func timeKey(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())) }

// agentKey keys the personal agent client's sub in bDevicePending.
func agentKey(client, sub string) []byte {
	return hash(fmt.Sprintf("%d:%s%s", len(client), client, sub))
}

func dueKey(at time.Time, kind byte, key []byte) []byte {
	return slices.Concat(timeKey(at), []byte{kind}, key)
}

func pendingKey(d *oauth.DeviceAuthorization, key []byte) []byte {
	return slices.Concat(agentKey(d.Client, d.Sub), timeKey(d.Expires), key)
}

// clientKey keys the personal agent client in bDevicePendingAgent.
func clientKey(client string) []byte { return hash(client) }

func pendingAgentKey(d *oauth.DeviceAuthorization, key []byte) []byte {
	return slices.Concat(clientKey(d.Client), timeKey(d.Expires), key)
}

// brandKey keys a brand in bDevicePendingOpen and bDevicePendingOpenSum.
func brandKey(brand string) []byte { return hash(brand) }

func pendingOpenKey(d *oauth.DeviceAuthorization, key []byte) []byte {
	return slices.Concat(brandKey(d.Brand), timeKey(d.Expires), key)
}

// openSum returns the count and the request JWTs' bytes of the open
// agents' pending device authorizations at brand, as bDevicePendingOpenSum
// holds them.
func openSum(tx *bolt.Tx, brand string) (n, size int64) {
	v := tx.Bucket(bDevicePendingOpenSum).Get(brandKey(brand))
	if len(v) != 16 {
		return 0, 0
	}
	return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
}

// addOpen adds n authorizations keeping size bytes to brand's sum (n and
// size below zero take them off).
func addOpen(tx *bolt.Tx, brand string, n, size int64) error {
	cn, cs := openSum(tx, brand)
	cn, cs = max(0, cn+n), max(0, cs+size)
	if cn == 0 {
		return tx.Bucket(bDevicePendingOpenSum).Delete(brandKey(brand))
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(cn))
	return tx.Bucket(bDevicePendingOpenSum).Put(brandKey(brand), binary.BigEndian.AppendUint64(v, uint64(cs)))
}

// indexDevice indexes the device authorization d stored at key.
func indexDevice(tx *bolt.Tx, d *oauth.DeviceAuthorization, key []byte) error {
	due := tx.Bucket(bDeviceDue)
	if err := due.Put(dueKey(d.Expires, dueExpired, key), nil); err != nil {
		return err
	}
	if err := due.Put(dueKey(d.Expires.Add(oauth.DeviceCodeKept), dueDelete, key), nil); err != nil {
		return err
	}
	if d.Status != oauth.Pending || d.StepUp {
		return nil
	}
	return indexPending(tx, d, key)
}

// indexPending counts the pending device authorization d stored at key
// among its agent sub's and its agent's (oauth.MaxPending,
// oauth.MaxPendingPerAgent, with its request JWT's bytes).
func indexPending(tx *bolt.Tx, d *oauth.DeviceAuthorization, key []byte) error {
	if err := tx.Bucket(bDevicePending).Put(pendingKey(d, key), nil); err != nil {
		return err
	}
	size := binary.BigEndian.AppendUint64(nil, uint64(len(d.RequestJWT)))
	if err := tx.Bucket(bDevicePendingAgent).Put(pendingAgentKey(d, key), size); err != nil {
		return err
	}
	if !d.Open {
		return nil
	}
	open := tx.Bucket(bDevicePendingOpen)
	if k := pendingOpenKey(d, key); open.Get(k) == nil {
		// Counted once, however often it is indexed.
		if err := open.Put(k, size); err != nil {
			return err
		}
		return addOpen(tx, d.Brand, 1, int64(len(d.RequestJWT)))
	}
	return nil
}

// indexDevices indexes the device authorizations stored before the
// indexes were: once, when the store is opened.
func indexDevices(tx *bolt.Tx) error {
	return tx.Bucket(bDevices).ForEach(func(k, _ []byte) error {
		var d oauth.DeviceAuthorization
		if _, err := get(tx, bDevices, k, &d); err != nil {
			return err
		}
		return indexDevice(tx, &d, slices.Clone(k))
	})
}

// settled takes d, stored at key, off the pending ones and drops its
// request JWT: the User decided, or its code expired. The caller stores d.
func settled(tx *bolt.Tx, d *oauth.DeviceAuthorization, key []byte) error {
	d.RequestJWT = ""
	return unpend(tx, d, key)
}

// unpend takes d, stored at key, off the pending ones.
func unpend(tx *bolt.Tx, d *oauth.DeviceAuthorization, key []byte) error {
	if err := tx.Bucket(bDevicePending).Delete(pendingKey(d, key)); err != nil {
		return err
	}
	if err := tx.Bucket(bDevicePendingAgent).Delete(pendingAgentKey(d, key)); err != nil {
		return err
	}
	open := tx.Bucket(bDevicePendingOpen)
	k := pendingOpenKey(d, key)
	v := open.Get(k)
	if v == nil {
		// Not counted, or taken off already (a decision, then the
		// deletion when due).
		return nil
	}
	var size int64
	if len(v) == 8 {
		size = int64(binary.BigEndian.Uint64(v))
	}
	if err := open.Delete(k); err != nil {
		return err
	}
	return addOpen(tx, d.Brand, -1, -size)
}

// pendingFor returns how many device authorizations the agent client has
// pending for sub at now (up to max), and when the soonest expires.
func pendingFor(tx *bolt.Tx, client, sub string, now time.Time, max int) (int, time.Time) {
	prefix := agentKey(client, sub)
	c := tx.Bucket(bDevicePending).Cursor()
	var n int
	var soonest time.Time
	for k, _ := c.Seek(slices.Concat(prefix, timeKey(now))); k != nil && bytes.HasPrefix(k, prefix) && n < max; k, _ = c.Next() {
		if n == 0 {
			soonest = time.Unix(0, int64(binary.BigEndian.Uint64(k[len(prefix):])))
		}
		n++
	}
	return n, soonest
}

// pendingForAgent returns how many device authorizations the agent client
// has pending for all its subs at now (up to max), the bytes of the
// request JWTs they keep, and when the soonest expires.
func pendingForAgent(tx *bolt.Tx, client string, now time.Time, max int) (n int, size int64, soonest time.Time) {
	prefix := clientKey(client)
	c := tx.Bucket(bDevicePendingAgent).Cursor()
	for k, v := c.Seek(slices.Concat(prefix, timeKey(now))); k != nil && bytes.HasPrefix(k, prefix) && n < max; k, v = c.Next() {
		if n == 0 {
			soonest = time.Unix(0, int64(binary.BigEndian.Uint64(k[len(prefix):])))
		}
		n++
		if len(v) == 8 {
			size += int64(binary.BigEndian.Uint64(v))
		}
	}
	return n, size, soonest
}

// pendingBound returns the bound, if any, that a new device authorization
// d asked by the agent (not a step-up) would pass at now, and when the
// soonest of the pending ones that bound counts expires.
func pendingBound(tx *bolt.Tx, d *oauth.DeviceAuthorization, now time.Time) (PendingBound, time.Time, bool) {
	if n, soonest := pendingFor(tx, d.Client, d.Sub, now, oauth.MaxPending); n >= oauth.MaxPending {
		return PendingPerSub, soonest, true
	}
	n, size, soonest := pendingForAgent(tx, d.Client, now, oauth.MaxPendingPerAgent)
	switch {
	case n >= oauth.MaxPendingPerAgent:
		return PendingPerAgent, soonest, true
	case size+int64(len(d.RequestJWT)) > oauth.MaxPendingBytesPerAgent:
		return PendingBytesPerAgent, soonest, true
	}
	if !d.Open {
		return 0, time.Time{}, false
	}
	// The sum counts, besides the pending, those expired that the
	// pruning (done first, in this transaction) has not reached yet: a
	// bound met a little early, never late.
	on, osize := openSum(tx, d.Brand)
	var bound PendingBound
	switch {
	case on >= oauth.MaxPendingOpenPerBrand:
		bound = PendingOpenPerBrand
	case osize+int64(len(d.RequestJWT)) > oauth.MaxPendingOpenBytesPerBrand:
		bound = PendingOpenBytesPerBrand
	default:
		return 0, time.Time{}, false
	}
	// When the soonest of them expires, or now when all have.
	prefix := brandKey(d.Brand)
	soonest = now
	if k, _ := tx.Bucket(bDevicePendingOpen).Cursor().Seek(slices.Concat(prefix, timeKey(now))); k != nil && bytes.HasPrefix(k, prefix) {
		soonest = time.Unix(0, int64(binary.BigEndian.Uint64(k[len(prefix):])))
	}
	return bound, soonest, true
}

// pruneDevices carries out, oldest first, at most devicePruneBatch of the
// entries of bDeviceDue due at now, and returns how many it carried out.
func pruneDevices(tx *bolt.Tx, now time.Time) (int, error) {
	due := tx.Bucket(bDeviceDue)
	var keys [][]byte
	c := due.Cursor()
	end := timeKey(now)
	for k, _ := c.First(); k != nil && len(keys) < devicePruneBatch && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		if err := due.Delete(k); err != nil {
			return 0, err
		}
		key := k[9:]
		var d oauth.DeviceAuthorization
		found, err := get(tx, bDevices, key, &d)
		switch {
		case !found:
			continue
		case err != nil:
			// One that cannot be read is deleted when due, all the
			// same: nothing else would.
			if k[8] == dueDelete {
				if err := tx.Bucket(bDevices).Delete(key); err != nil {
					return 0, err
				}
			}
			continue
		}
		switch k[8] {
		case dueExpired:
			jwt := d.RequestJWT
			if err := settled(tx, &d, key); err != nil {
				return 0, err
			}
			if jwt != "" {
				if err := put(tx, bDevices, key, d); err != nil {
					return 0, err
				}
			}
		case dueDelete:
			if err := unpend(tx, &d, key); err != nil {
				return 0, err
			}
			if up := stepUpKey(&d); d.StepUp && bytes.Equal(tx.Bucket(bStepUps).Get(up), key) {
				if err := tx.Bucket(bStepUps).Delete(up); err != nil {
					return 0, err
				}
			}
			codes := tx.Bucket(bUserCodes)
			if bytes.Equal(codes.Get([]byte(d.UserCode)), key) {
				if err := codes.Delete([]byte(d.UserCode)); err != nil {
					return 0, err
				}
			}
			if err := tx.Bucket(bDevices).Delete(key); err != nil {
				return 0, err
			}
		}
	}
	return len(keys), nil
}
