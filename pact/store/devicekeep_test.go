package store

import (
	"errors"
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
	userCode, err := s.NewDeviceAuthorization(dc, d)
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
	if code, err := s.NewDeviceAuthorization("dc_2", d); !errors.Is(err, ErrUserCodeTaken) {
		t.Fatalf("a second authorization given only a taken code: %q %v, want ErrUserCodeTaken", code, err)
	}
	if err := s.DecideDevice("BCDF-GHJK", oauth.Decision{User: "acct-1", Approve: true, Scopes: []string{"orders:read"}}, now); err != nil {
		t.Fatal(err)
	}
	if g, err := s.RedeemDeviceCode("dc_1", "acme", "https://pa.example", "u1", now); err != nil || g.AgentSub != "u1" {
		t.Fatalf("the code's own authorization: %+v %v", g, err)
	}
	if _, found := device(t, s, "dc_2"); found {
		t.Fatal("the failed authorization was stored")
	}
}
