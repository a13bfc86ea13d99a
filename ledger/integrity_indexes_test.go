package ledger_test

import (
	"context"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// An operator with the row store writes a copy of a row under another
// number and points some of its indexes at it, so that lookups by order,
// customer or grant show one version and reads by id another; or writes
// a row no index lists, which reads by id serve and no listing shows.
// fsck names the row and each index that leads elsewhere than its id.
func TestIntegrityFindsIndexesLeadingElsewhere(t *testing.T) {
	ctx := context.Background()
	forged := strings.Repeat("f", 64)
	unauthorized := func(r *ledger.Row) { r.Principal, r.Status = "acct-00000", ledger.Unauthorized }
	for _, tc := range []struct {
		name  string
		edits func(id string) []func(*bbolt.Tx) error
		want  func(id string) []string
	}{
		{
			name: "the listings' copy edited",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.IndexCopy(id, unauthorized)}
			},
			want: func(id string) []string {
				return []string{
					"the row store's index by_time has an entry for row " + id + " that points at another record than its id",
					"the row store's index by_target has an entry for row " + id + " that points at another record than its id",
					"the row store holds a record of row " + id + " that its index of ids (row_seq) does not lead to",
					"the row store's record of row " + id + " has no entry in its index by_time, which lists every row",
				}
			},
		},
		{
			name: "the record by id edited",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.IndexCopy(id, nil), tamper.EditRow(id, unauthorized)}
			},
			want: func(id string) []string {
				return []string{
					"the row store's index by_principal has an entry for row " + id + " that points at another record than its id",
					"the row store holds a record of row " + id + " that its index of ids (row_seq) does not lead to",
					"the row store's record of row " + id + " has no entry in its index by_time",
				}
			},
		},
		{
			name: "the lookups' copy edited, the time index left",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.IndexCopy(id, unauthorized, "by_principal", "by_grant", "by_target")}
			},
			want: func(id string) []string {
				return []string{
					"the row store's index by_target has an entry for row " + id + " that points at another record than its id",
					"the row store's index by_grant has an entry for row " + id + " that points at another record than its id",
					"the row store holds a record of row " + id + " that its index of ids (row_seq) does not lead to",
				}
			},
		},
		{
			name: "a forged row outside the listings",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.ForgeRow(id, forged), tamper.Unindex(forged)}
			},
			want: func(string) []string {
				return []string{"the row store's record of row " + forged + " has no entry in its index by_time, which lists every row"}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.startLog(t)
			row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
			h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5532"})))
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("before the edit:\n%s", problems(got))
			}
			for _, e := range tc.edits(row.ID) {
				h.tamper(t, e)
			}
			got := problems(integrity(t, h))
			for _, w := range tc.want(row.ID) {
				if !strings.Contains(got, w) {
					t.Errorf("fsck after the edit:\n%s\nwant a finding %q", got, w)
				}
			}
		})
	}
}
