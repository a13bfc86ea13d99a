package main

import (
	"strings"
	"testing"
)

// TestDisputeResolveSaysHow: resolve without --as is a usage error that
// lists the resolutions, and records nothing over an earlier resolution;
// resolve --as incident is refused for a row that names no incident and
// taken for one that does; --as is for resolve only.
func TestDisputeResolveSaysHow(t *testing.T) {
	f := start(t)
	status := func() string {
		t.Helper()
		code, out, errs := f.ctl(t, "support", "show", f.rowID)
		if code != 0 {
			t.Fatalf("show: exit %d %s", code, errs)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "dispute ") && !strings.HasPrefix(l, "dispute 2") {
				return strings.TrimSpace(strings.TrimPrefix(l, "dispute"))
			}
		}
		t.Fatalf("show prints no dispute line:\n%s", out)
		return ""
	}
	if code, out, errs := f.ctl(t, "support", "dispute", "open", f.rowID, "--note", "customer says never approved"); code != 0 {
		t.Fatalf("dispute open: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := f.ctl(t, "support", "dispute", "resolve", f.rowID, "--as", "customer-authorized", "--note", "grant shown"); code != 0 {
		t.Fatalf("dispute resolve --as customer-authorized: exit %d\n%s%s", code, out, errs)
	}

	tests := []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"resolve without --as", []string{"dispute", "resolve", f.rowID, "--note", "x"}, exitUsage,
			[]string{"dispute resolve needs --as", "customer-authorized", "incident", "other"}},
		{"resolve with an unknown --as", []string{"dispute", "resolve", f.rowID, "--as", "fine", "--note", "x"}, exitUsage,
			[]string{`--as "fine": want customer-authorized, incident or other`}},
		{"open with --as", []string{"dispute", "open", f.rowID, "--as", "other", "--note", "x"}, exitUsage,
			[]string{"--as is for dispute resolve"}},
		{"resolve as incident, no incident", []string{"dispute", "resolve", f.rowID[:12], "--as", "incident", "--note", "x"}, exitError,
			[]string{"row " + f.rowID + " names no incident (its status is authorized)", "customer-authorized", "other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := f.ctl(t, "support", tc.args...)
			if code != tc.code {
				t.Fatalf("%s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), code, tc.code, out, errs)
			}
			for _, m := range tc.msg {
				if !strings.Contains(errs, m) {
					t.Errorf("%s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), m, errs)
				}
			}
			if got := status(); got != "resolved customer authorized" {
				t.Errorf("%s: the row's dispute is now %q, want the earlier resolution to stand", strings.Join(tc.args, " "), got)
			}
		})
	}

	row, _ := f.incidentRow(t)
	if code, out, errs := f.ctl(t, "support", "dispute", "open", row, "--note", "customer says never approved"); code != 0 {
		t.Fatalf("dispute open: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := f.ctl(t, "support", "dispute", "resolve", row, "--as", "incident", "--note", "refunded"); code != 0 || !strings.Contains(out, "dispute resolved incident") {
		t.Fatalf("dispute resolve --as incident of an incident's row: exit %d\n%s%s", code, out, errs)
	}
}
