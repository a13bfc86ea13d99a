package ledger

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/retention"
)

// A leaf's bytes are part of the log: every leaf ever written must come out
// the same, line breaks in values turned into spaces included.
func TestLeafBytesAreStable(t *testing.T) {
	r := &Row{ID: "ab", Kind: KindReceipt, EvidenceSHA256: "cd", GrantID: "grant\r\n1", Status: Incident, RecordedAt: time.Date(2026, 12, 1, 9, 0, 0, 5, time.UTC)}
	r.BrandKey.JWKSSnapshot = "s1"
	r.Verifier.DuplicateOf = "x\ny"
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"row", rowLeafOf(r, tokenDigests{receipt: "sha256:aa", token: "t\r"}),
			"pactledger leaf v1\nkind receipt\nrow ab\nreceipt sha256:aa\nrequest -\ntoken t \nevidence sha256:cd\njwks s1 -\ngrant sha256:12591419deb343bc8f17b12aa6e7fc4455d2978f65f171038b52d0c2ea195dd3\nstatus incident\nclass unspecified\nduplicate-of x y\nrecorded 2026-12-01T09:00:00.000000005Z\n"},
		{"dispute", disputeLeaf("row\n1", 3, DisputeEvent{Note: "n", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}),
			"pactledger leaf v1\nkind dispute\nrow row 1\nevent 3\nstatus unspecified\nnote sha256:1b16b1df538ba12dc3f97edbb85caa7050d46c148134290feba80f8236c83db9\nby -\nat 2026-01-02T03:04:05Z\n"},
		{"policy", policyLeaf("1-ab", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), retention.DefaultPolicy()),
			"pactledger leaf v1\nkind policy\npolicy 1-ab\nat 2026-12-01T09:00:00Z\nmoney_moved 18 months\naccount_changed 12 months\nread_only 90 days\nrefused 12 months\nincident 12 months\ndispute 12 months\n"},
	}
	for _, tc := range tests {
		if string(tc.got) != tc.want {
			t.Errorf("%s leaf:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}

// A policy leaf reads back as the periods it was written with, and names
// the ref it was queued under, as a leaf read back from write-once
// storage must.
func TestPolicyLeafReadsBack(t *testing.T) {
	p := retention.DefaultPolicy()
	p.Periods[retention.ReadOnly] = retention.Period{Months: 1, Days: 15}
	data := policyLeaf("7-cd", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), p)
	f, err := ParseLeaf(data)
	if err != nil {
		t.Fatal(err)
	}
	got := policyPeriods(f)
	for _, c := range policyClasses {
		if got[c] != p.Periods[c] {
			t.Errorf("%s: got %v, want %v", c, got[c], p.Periods[c])
		}
	}
	if got, want := leafRef(data), policyRef("7-cd"); got != want {
		t.Errorf("ref %q, want %q", got, want)
	}
}

// A row's proof holds its leaf to the lines the ledger writes in a leaf of
// its kind (proof.LeafLines), and a customer's --event proof likewise: a
// line added to or dropped from one of these leaves here, and not there,
// would have every such proof refused.
func TestLeavesHoldTheLinesProofsExpect(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := &Row{ID: "ab", Kind: KindReceipt, RecordedAt: at}
	refusal := *r
	refusal.Kind = KindRefusal
	for _, tc := range []struct {
		kind string
		leaf []byte
	}{
		{LeafReceipt, rowLeafOf(r, tokenDigests{})},
		{LeafRefusal, rowLeafOf(&refusal, tokenDigests{})},
		{LeafDispute, disputeLeaf("ab", 0, DisputeEvent{At: at})},
		{LeafIncidentClose, incidentCloseLeaf(&IncidentRecord{ID: "inc-1", RowID: "ab", ClosedAt: at})},
	} {
		var names []string
		for _, ln := range strings.Split(strings.TrimSuffix(string(tc.leaf), "\n"), "\n")[1:] {
			name, _, _ := strings.Cut(ln, " ")
			names = append(names, name)
		}
		if want := proof.LeafLines(tc.kind); !slices.Equal(names, want) {
			t.Errorf("%s leaf: lines %v, proof.LeafLines %v", tc.kind, names, want)
		}
		if err := proof.Proves(string(tc.leaf), "ab", map[string]string{LeafDispute: "dispute/0", LeafIncidentClose: "incident-close"}[tc.kind]); err != nil {
			t.Errorf("%s leaf: %v", tc.kind, err)
		}
	}
}
