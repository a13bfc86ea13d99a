package server_test

import (
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// A writer revoking a grant an admin revoked is answered with the
// revocation in force and when the admin's took effect, not the admin's
// own record: who, why, nor when it was recorded (docs/api.md,
// RevokeGrant). An admin is told all of it.
func TestAWriterIsNotToldTheAdminsRecord(t *testing.T) {
	e := newEnv(t, jose.ES256)
	if code := e.call(t, "POST", "/v1/grants/g_fraud:revoke", "admin", map[string]any{"revokedAt": "2026-10-07T13:10:00Z", "note": "fraud case 4411"}, nil); code != 200 {
		t.Fatalf("admin revoke = %d", code)
	}
	for _, c := range []struct {
		role  string
		shown bool
	}{{"writer", false}, {"admin", true}} {
		var rev struct{ Revocation map[string]any }
		if code := e.call(t, "POST", "/v1/grants/g_fraud:revoke", c.role, map[string]any{"revokedAt": "8000-01-01T00:00:00Z"}, &rev); code != 200 {
			t.Fatalf("%s revoke = %d", c.role, code)
		}
		if at := rev.Revocation["adminRevokedAt"]; at != "2026-10-07T13:10:00Z" {
			t.Errorf("%s's answer: adminRevokedAt %v; want the admin's revocation's time", c.role, at)
		}
		for _, f := range []string{"adminBy", "adminNote", "adminRecordedAt"} {
			if v := rev.Revocation[f]; (v != nil && v != "") != c.shown {
				t.Errorf("%s's answer: %s = %v; shown %v", c.role, f, v, c.shown)
			}
		}
	}
}
