package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
)

// newDevice stores a device authorization of https://pa.example for sub,
// asked at now, under device code dc, and returns its user code.
func newDevice(t *testing.T, s *Store, dc, sub string, stepUp bool, now time.Time) string {
	t.Helper()
	d := oauth.NewDeviceAuthorization("acme", "https://pa.example", sub, "p.a.j."+dc, []string{"orders:read"}, 5*time.Second, now)
	d.StepUp = stepUp
	userCode, err := s.NewDeviceAuthorization(dc, d, now)
	if err != nil {
		t.Fatal(err)
	}
	return userCode
}

// device reads the device authorization of dc as stored.
func device(t *testing.T, s *Store, dc string) (oauth.DeviceAuthorization, bool) {
	t.Helper()
	var d oauth.DeviceAuthorization
	var found bool
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		found, err = get(tx, bDevices, hash(dc), &d)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, found
}

// keyCount counts the keys of bucket b.
func keyCount(t *testing.T, s *Store, b []byte) int {
	t.Helper()
	var n int
	if err := s.view(func(tx *bolt.Tx) error { n = tx.Bucket(b).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Each new device authorization carries out at most devicePruneBatch of
// what is due for the others, oldest first: a backlog of expired ones
// (their request JWTs to drop, then themselves and their user codes to
// delete) goes over a few writes, none of which does it all.
func TestDeviceAuthorizationPruningIsBoundedPerWrite(t *testing.T) {
	s := openStore(t)
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	const n = devicePruneBatch + 10
	for i := range n {
		newDevice(t, s, fmt.Sprintf("dc_%d", i), fmt.Sprintf("u%d", i), false, t0)
	}
	if got := keyCount(t, s, bDeviceDue); got != 2*n {
		t.Fatalf("%d entries due, want %d: one at expiry, one to delete", got, 2*n)
	}
	late := t0.Add(oauth.DeviceCodeTTL + oauth.DeviceCodeKept + time.Second)
	for i := 1; keyCount(t, s, bDevices) > i-1; i++ {
		before := keyCount(t, s, bDeviceDue)
		newDevice(t, s, fmt.Sprintf("dc_late_%d", i), fmt.Sprintf("late-%d", i), true, late)
		if done := before + 2 - keyCount(t, s, bDeviceDue); done > devicePruneBatch {
			t.Fatalf("write %d carried out %d due entries, want at most %d", i, done, devicePruneBatch)
		}
		if i > 2*n/devicePruneBatch+1 {
			t.Fatalf("%d device authorizations kept after %d writes", keyCount(t, s, bDevices), i)
		}
	}
	if got := keyCount(t, s, bUserCodes); got != keyCount(t, s, bDevices) {
		t.Fatalf("%d user codes for %d device authorizations", got, keyCount(t, s, bDevices))
	}
	if got := keyCount(t, s, bDevicePending); got != 0 {
		t.Fatalf("%d entries pending after every agent's authorization expired", got)
	}
}

// A turn that needs what a step-up still pending asks gets that
// step-up's link again: an agent sending turn after turn that need a
// scope it lacks leaves one step-up pending, not one a turn. A step-up
// that asks anything else (another sub, scope or extended grant), one
// whose code is past half its time, and one the User answered, are not
// given again; the deletion of a step-up takes its entry with it.
func TestAStepUpPendingIsGivenAgain(t *testing.T) {
	s := openStore(t)
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	first := newDevice(t, s, "dc_1", "u1", true, t0)
	for i := range 20 {
		if got := newDevice(t, s, fmt.Sprintf("dc_again_%d", i), "u1", true, t0.Add(time.Duration(i)*time.Second)); got != first {
			t.Fatalf("turn %d: user code %s, want the pending step-up's %s", i, got, first)
		}
	}
	if n := keyCount(t, s, bDevices); n != 1 {
		t.Fatalf("%d device authorizations after 21 turns needing one scope, want 1", n)
	}
	other := func(edit func(*oauth.DeviceAuthorization)) string {
		d := oauth.NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j.x", []string{"orders:read"}, 5*time.Second, t0)
		d.StepUp = true
		edit(&d)
		code, err := s.NewDeviceAuthorization(oauth.NewSecret("dc_"), d, t0)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	for what, edit := range map[string]func(*oauth.DeviceAuthorization){
		"another sub":            func(d *oauth.DeviceAuthorization) { d.Sub = "u2" },
		"another scope":          func(d *oauth.DeviceAuthorization) { d.Scopes = []string{"orders:cancel"} },
		"another extended grant": func(d *oauth.DeviceAuthorization) { d.Extends = "a2agrant_1" },
		"asked by the agent":     func(d *oauth.DeviceAuthorization) { d.StepUp = false },
	} {
		if got := other(edit); got == first {
			t.Errorf("a step-up of %s: the pending one's user code", what)
		}
	}
	// Past half its time: a fresh one, given again from then.
	late := t0.Add(oauth.DeviceCodeTTL/2 + time.Second)
	fresh := newDevice(t, s, "dc_late", "u1", true, late)
	if fresh == first || newDevice(t, s, "dc_late_again", "u1", true, late.Add(time.Second)) != fresh {
		t.Fatalf("past half its time: %s, then again; want a fresh code, then the same", fresh)
	}
	// Answered: not given again.
	if _, err := s.DecideDevice(fresh, oauth.Decision{User: "acct-1", Approve: true, Scopes: []string{"orders:read"}}, late); err != nil {
		t.Fatal(err)
	}
	if got := newDevice(t, s, "dc_after", "u1", true, late.Add(2*time.Second)); got == fresh {
		t.Fatalf("after the User answered the step-up: its code %s given again", got)
	}
	// Deleted with their codes: no entry left.
	if _, err := s.Prune(context.Background(), late.Add(oauth.DeviceCodeTTL+oauth.DeviceCodeKept+time.Minute), time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := keyCount(t, s, bStepUps); n != 0 {
		t.Errorf("%d step-up entries after every step-up was deleted", n)
	}
}

// The agent's request JWT is kept only while a denial may need it as
// evidence: the refusal a denial queues carries it, and the authorization
// keeps it no longer; an approval or the code's expiry drops it too.
func TestARequestJWTIsKeptOnlyWhileADenialNeedsIt(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	approved := newDevice(t, s, "dc_approved", "u1", false, now)
	denied := newDevice(t, s, "dc_denied", "u1", false, now)
	newDevice(t, s, "dc_pending", "u1", false, now)
	if _, err := s.DecideDevice(approved, oauth.Decision{User: "acct-1", Approve: true, Scopes: []string{"orders:read"}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideDevice(denied, oauth.Decision{User: "acct-1"}, now); err != nil {
		t.Fatal(err)
	}
	for dc, want := range map[string]string{"dc_approved": "", "dc_denied": "", "dc_pending": "p.a.j.dc_pending"} {
		if d, _ := device(t, s, dc); d.RequestJWT != want {
			t.Errorf("%s keeps request JWT %q, want %q", dc, d.RequestJWT, want)
		}
	}
	items, err := s.Outbox(10)
	if err != nil || len(items) != 1 || items[0].Refusal == nil || items[0].Refusal.RequestJWT != "p.a.j.dc_denied" {
		t.Fatalf("outbox %+v %v, want the denial's refusal with its request JWT", items, err)
	}
	later := now.Add(oauth.DeviceCodeTTL + time.Second)
	newDevice(t, s, "dc_later", "u1", false, later)
	if d, found := device(t, s, "dc_pending"); !found || d.RequestJWT != "" || d.StateAt(later) != oauth.Expired {
		t.Fatalf("the expired authorization: found %v, request JWT %q, %s; want it kept, expired, without its JWT", found, d.RequestJWT, d.StateAt(later))
	}
}

// A personal agent has at most oauth.MaxPending device authorizations
// pending for a sub; step-ups, which the Provider asks for itself, are
// neither counted nor refused. The refusal says when the soonest expires.
func TestStepUpsAreNotCountedAgainstThePendingCap(t *testing.T) {
	s := openStore(t)
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	now := t0
	for i := range oauth.MaxPending - 1 {
		newDevice(t, s, fmt.Sprintf("dc_%d", i), "u1", false, now)
		now = now.Add(time.Second)
	}
	newDevice(t, s, "dc_step_up_1", "u1", true, now)
	newDevice(t, s, "dc_last", "u1", false, now)
	newDevice(t, s, "dc_step_up_2", "u1", true, now)
	d := oauth.NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j", []string{"orders:read"}, 5*time.Second, now)
	_, err := s.NewDeviceAuthorization("dc_over", d, now)
	var limit *PendingLimitError
	if !errors.As(err, &limit) || !errors.Is(err, ErrTooManyPending) || !limit.Until.Equal(t0.Add(oauth.DeviceCodeTTL)) {
		t.Fatalf("one past the cap: %v, want ErrTooManyPending until %s", err, t0.Add(oauth.DeviceCodeTTL))
	}
	if _, found := device(t, s, "dc_over"); found {
		t.Fatal("the refused authorization was stored")
	}
}

// A personal agent's subs are whatever it signs: besides oauth.MaxPending
// for one sub, it has at most oauth.MaxPendingPerAgent device
// authorizations pending for all its subs together, and their request
// JWTs keep at most oauth.MaxPendingBytesPerAgent. Past either it is
// refused with the bound named; its step-ups and other agents are not.
func TestPendingDeviceAuthorizationsAreBoundedPerAgent(t *testing.T) {
	const agent, other = "https://pa.example", "https://other-pa.example"
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	ask := func(client, sub, jwt string, stepUp bool) oauth.DeviceAuthorization {
		d := oauth.NewDeviceAuthorization("acme", client, sub, jwt, []string{"orders:read"}, 5*time.Second, t0)
		d.StepUp = stepUp
		return d
	}
	// fill stores n of the agent's authorizations, each for a sub of its
	// own and keeping a request JWT of size bytes, in one transaction.
	fill := func(t *testing.T, s *Store, n, size int) {
		t.Helper()
		jwt := strings.Repeat("j", size)
		err := s.update(func(tx *txn) error {
			for i := range n {
				if _, refused, err := newDeviceAuthorization(tx.Tx, fmt.Sprintf("dc_fill_%d", i), ask(agent, fmt.Sprintf("sub-%d", i), jwt, false), t0); err != nil || refused != nil {
					return cmp.Or(err, error(refused))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("filling %d: %v", n, err)
		}
	}
	for _, tc := range []struct {
		name    string
		n, size int
		bound   PendingBound
	}{
		{name: "count", n: oauth.MaxPendingPerAgent, size: 600, bound: PendingPerAgent},
		{name: "bytes", n: oauth.MaxPendingBytesPerAgent / (16 << 10), size: 16 << 10, bound: PendingBytesPerAgent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			fill(t, s, tc.n, tc.size)
			_, err := s.NewDeviceAuthorization("dc_over", ask(agent, "a-new-sub", strings.Repeat("j", tc.size), false), t0)
			limit, ok := errors.AsType[*PendingLimitError](err)
			if !ok || !errors.Is(err, ErrTooManyPending) || limit.Bound != tc.bound || !limit.Until.Equal(t0.Add(oauth.DeviceCodeTTL)) {
				t.Fatalf("one past the agent's bound: %v, want ErrTooManyPending for %s until %s", err, tc.bound, t0.Add(oauth.DeviceCodeTTL))
			}
			if _, found := device(t, s, "dc_over"); found {
				t.Fatal("the refused authorization was stored")
			}
			newDevice(t, s, "dc_step_up", "a-new-sub", true, t0) // the Provider's own
			if _, err := s.NewDeviceAuthorization("dc_other", ask(other, "sub-0", "p.a.j", false), t0); err != nil {
				t.Fatalf("another agent: %v", err)
			}
			// One answered frees its place.
			if _, err := s.DecideDevice(userCode(t, s, "dc_fill_0"), oauth.Decision{User: "acct-1", Approve: true, Scopes: []string{"orders:read"}}, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.NewDeviceAuthorization("dc_after", ask(agent, "a-new-sub", strings.Repeat("j", tc.size), false), t0); err != nil {
				t.Fatalf("after one was answered: %v", err)
			}
		})
	}
}

// userCode is the user code of the device authorization of dc.
func userCode(t *testing.T, s *Store, dc string) string {
	t.Helper()
	d, found := device(t, s, dc)
	if !found {
		t.Fatalf("%s not found", dc)
	}
	return d.UserCode
}

// A user code is never given to two device authorizations: when every
// code tried is taken, the new authorization fails and the one holding
// the code keeps it.
func TestAUserCodeCollisionFailsTheAuthorization(t *testing.T) {
	s := openStore(t)
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	defer func(f func() string) { newUserCode = f }(newUserCode)
	newUserCode = func() string { return "BCDF-GHJK" }
	if code := newDevice(t, s, "dc_1", "u1", false, now); code != "BCDF-GHJK" {
		t.Fatalf("user code %s", code)
	}
	d := oauth.NewDeviceAuthorization("acme", "https://pa.example", "u2", "p.a.j", []string{"orders:read"}, 5*time.Second, now)
	if code, err := s.NewDeviceAuthorization("dc_2", d, now); !errors.Is(err, ErrUserCodeTaken) {
		t.Fatalf("a second authorization given only a taken code: %q %v, want ErrUserCodeTaken", code, err)
	}
	if _, err := s.DecideDevice("BCDF-GHJK", oauth.Decision{User: "acct-1", Approve: true, Scopes: []string{"orders:read"}}, now); err != nil {
		t.Fatal(err)
	}
	if g, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", nil, now, anyRefreshToken); err != nil || g.AgentSub != "u1" {
		t.Fatalf("the code's own authorization: %+v %v", g, err)
	}
	if _, found := device(t, s, "dc_2"); found {
		t.Fatal("the failed authorization was stored")
	}
}

// Device authorizations stored before the store indexed them are indexed
// when it is opened, and pruned like the others.
func TestDeviceAuthorizationsStoredBeforeTheIndexArePruned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	newDevice(t, s, "dc_old", "u1", false, t0)
	s = reopenWithout(t, s, path, bDeviceDue, bDevicePending)
	defer s.Close()
	late := t0.Add(oauth.DeviceCodeTTL + oauth.DeviceCodeKept + time.Second)
	newDevice(t, s, "dc_new", "u1", false, late)
	if _, found := device(t, s, "dc_old"); found || keyCount(t, s, bUserCodes) != 1 {
		t.Fatalf("the authorization stored before the index: found %v, %d user codes; want it pruned", found, keyCount(t, s, bUserCodes))
	}
}

// Device authorizations pending in a file written before they were
// indexed by agent are indexed when it is opened, and counted.
func TestPendingDeviceAuthorizationsStoredBeforeTheAgentIndexAreCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	newDevice(t, s, "dc_pending", "u1", false, t0)
	newDevice(t, s, "dc_step_up", "u2", true, t0)
	s = reopenWithout(t, s, path, bDevicePendingAgent)
	defer s.Close()
	if n := keyCount(t, s, bDevicePendingAgent); n != 1 {
		t.Fatalf("%d indexed by agent, want the one pending that is not a step-up", n)
	}
}

// reopenWithout drops buckets from the file of s at path, as a file
// written before they were kept holds none, and opens the store again.
func reopenWithout(t *testing.T, s *Store, path string, buckets ...[]byte) *Store {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	return s
}

// A device authorization approved for an existing grant that ends before
// its code is redeemed is pending again (reopen), and counted again among
// its agent sub's and its agent's pending ones, with its request JWT.
func TestAReopenedAuthorizationIsCountedAsPending(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	newDevice(t, s, "dc_reopened", "u1", false, t0)
	err = s.db.Update(func(tx *bolt.Tx) error {
		key := hash("dc_reopened")
		var d oauth.DeviceAuthorization
		if _, err := get(tx, bDevices, key, &d); err != nil {
			return err
		}
		// Approved without consent for grant g-1, as decide leaves it.
		d.Status, d.GrantID, d.User = oauth.Approved, "g-1", "jane"
		if err := settled(tx, &d, key); err != nil {
			return err
		}
		if err := put(tx, bDevices, key, d); err != nil {
			return err
		}
		if k, _ := tx.Bucket(bDevicePendingAgent).Cursor().First(); k != nil {
			return errors.New("still pending by agent once approved")
		}
		answer, err := reopen(tx, &d, key, t0.Add(time.Minute))
		if err != nil || answer == nil {
			return fmt.Errorf("reopen: %v, %v", answer, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, m := keyCount(t, s, bDevicePending), keyCount(t, s, bDevicePendingAgent); n != 1 || m != 1 {
		t.Fatalf("reopened: %d pending by sub, %d by agent; want 1 and 1", n, m)
	}
}

// Personal agents no one registered (provider.openAgents) cost nothing
// to make: one host name each. Besides the bounds of each, their pending
// device authorizations at a brand are bounded together, by count and by
// the request JWTs they keep. Registered agents are not counted, and are
// not refused for the open agents' flood; another brand's open agents
// have a bound of their own; a place comes back when one is answered or
// expires, and the sum of the open ones stays that of the pending ones
// kept, whatever the order of decisions and pruning.
func TestPendingDeviceAuthorizationsOfOpenAgentsAreBoundedPerBrand(t *testing.T) {
	t0 := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	ask := func(brand, client, sub, jwt string, open bool) oauth.DeviceAuthorization {
		d := oauth.NewDeviceAuthorization(brand, client, sub, jwt, []string{"orders:read"}, 5*time.Second, t0)
		d.Open = open
		return d
	}
	// fill stores n authorizations of open agents at acme, no agent
	// near its own bounds, each keeping a request JWT of size bytes.
	fill := func(t *testing.T, s *Store, n, size int) {
		t.Helper()
		jwt := strings.Repeat("j", size)
		err := s.update(func(tx *txn) error {
			for i := range n {
				d := ask("acme", fmt.Sprintf("https://pa-%d.open.example", i/1000), fmt.Sprintf("sub-%d", i), jwt, true)
				if _, refused, err := newDeviceAuthorization(tx.Tx, fmt.Sprintf("dc_fill_%d", i), d, t0); err != nil || refused != nil {
					return cmp.Or(err, error(refused))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("filling %d: %v", n, err)
		}
	}
	// kept checks that the sum of acme's open ones is the count and the
	// bytes of the entries kept for them.
	kept := func(t *testing.T, s *Store, want int) {
		t.Helper()
		_ = s.db.View(func(tx *bolt.Tx) error {
			var n, size int64
			prefix := brandKey("acme")
			c := tx.Bucket(bDevicePendingOpen).Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				n++
				size += int64(binary.BigEndian.Uint64(v))
			}
			if sn, ssize := openSum(tx, "acme"); sn != n || ssize != size || n != int64(want) {
				t.Errorf("open agents' sum at acme: %d, %d bytes; entries kept: %d, %d bytes; want %d", sn, ssize, n, size, want)
			}
			return nil
		})
	}
	for _, tc := range []struct {
		name    string
		n, size int
		bound   PendingBound
	}{
		{name: "count", n: oauth.MaxPendingOpenPerBrand, size: 600, bound: PendingOpenPerBrand},
		{name: "bytes", n: oauth.MaxPendingOpenBytesPerBrand / (16 << 10), size: 16 << 10, bound: PendingOpenBytesPerBrand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			fill(t, s, tc.n, tc.size)
			kept(t, s, tc.n)
			_, err := s.NewDeviceAuthorization("dc_over", ask("acme", "https://pa-new.open.example", "sub-new", strings.Repeat("j", tc.size), true), t0)
			limit, ok := errors.AsType[*PendingLimitError](err)
			if !ok || limit.Bound != tc.bound || !limit.Until.Equal(t0.Add(oauth.DeviceCodeTTL)) {
				t.Fatalf("an open agent past the brand's bound: %v, want ErrTooManyPending for %s until %s", err, tc.bound, t0.Add(oauth.DeviceCodeTTL))
			}
			if !strings.Contains(err.Error(), "personal agents it has not registered") {
				t.Errorf("the refusal does not say which agents the bound counts: %v", err)
			}
			if _, found := device(t, s, "dc_over"); found {
				t.Fatal("the refused authorization was stored")
			}
			if _, err := s.NewDeviceAuthorization("dc_registered", ask("acme", "https://pa.example", "sub-0", "p.a.j", false), t0); err != nil {
				t.Fatalf("a registered agent during the open agents' flood: %v", err)
			}
			if _, err := s.NewDeviceAuthorization("dc_globex", ask("globex", "https://pa-new.open.example", "sub-new", "p.a.j", true), t0); err != nil {
				t.Fatalf("an open agent at another brand: %v", err)
			}
			// One answered frees its place, once.
			if _, err := s.DecideDevice(userCode(t, s, "dc_fill_0"), oauth.Decision{User: "acct-1", Approve: true, Scopes: []string{"orders:read"}}, t0); err != nil {
				t.Fatal(err)
			}
			kept(t, s, tc.n-1)
			if _, err := s.NewDeviceAuthorization("dc_after", ask("acme", "https://pa-new.open.example", "sub-new", strings.Repeat("j", tc.size), true), t0); err != nil {
				t.Fatalf("after one was answered: %v", err)
			}
			if _, err := s.NewDeviceAuthorization("dc_over2", ask("acme", "https://pa-new.open.example", "sub-new2", strings.Repeat("j", tc.size), true), t0); !errors.Is(err, ErrTooManyPending) {
				t.Fatalf("past the bound again: %v", err)
			}
			// Once all expired, the pruning takes them off the sum: the
			// answered one too, when it is deleted, without taking it
			// off twice.
			later := t0.Add(oauth.DeviceCodeTTL + oauth.DeviceCodeKept + time.Second)
			if _, err := s.Prune(context.Background(), later, time.Hour); err != nil {
				t.Fatal(err)
			}
			kept(t, s, 0)
			if _, err := s.NewDeviceAuthorization("dc_next", ask("acme", "https://pa-new.open.example", "sub-new", strings.Repeat("j", tc.size), true), later); err != nil {
				t.Fatalf("once the pending ones expired: %v", err)
			}
			kept(t, s, 1)
		})
	}
}
