package brand_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brand"
)

// recordsDir writes the shop brand with n records in a source file and
// returns its directory.
func recordsDir(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	var sb strings.Builder
	sb.WriteString("[")
	for i := range n {
		if i > 0 {
			sb.WriteString(",\n")
		}
		fmt.Fprintf(&sb, `{"id": "S-%07d", "account": "a1", "status": "shipped"}`, i)
	}
	sb.WriteString("]\n")
	file := strings.Replace(shop, "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: orders.json\n", 1)
	file = strings.Replace(file, `idPattern: "S-[0-9]{3}"`, `idPattern: "S-[0-9]{3,}"`, 1)
	for name, body := range map[string]string{"shop.yaml": file, "orders.json": sb.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// BenchmarkLoadRecords loads a brand whose record source holds 20,000
// records (about 1 MiB of the 4 MiB a source may hold).
func BenchmarkLoadRecords(b *testing.B) {
	dir := recordsDir(b, 20000)
	for b.Loop() {
		if _, err := brand.Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup looks up the last of 20,000 records, in another letter
// case.
func BenchmarkLookup(b *testing.B) {
	bs, err := brand.Load(recordsDir(b, 20000))
	if err != nil {
		b.Fatal(err)
	}
	rt, ctx := bs["shop"].RecordType("order"), context.Background()
	for b.Loop() {
		if r, err := rt.Lookup(ctx, "s-0019999"); err != nil || r == nil {
			b.Fatal(r, err)
		}
	}
}

// A record's id is one in any letter case, as Unicode folds it
// (strings.EqualFold): a second record whose id differs only in case is
// refused, naming both, and a lookup finds a record by its id in any case,
// among many.
func TestRecordIDsAreOneInAnyLetterCase(t *testing.T) {
	withIDs := func(a, b string) string {
		return strings.Replace(shop, "      - {id: S-100, account: a1, status: processing}\n",
			"      - {id: "+a+", account: a1, status: processing}\n      - {id: "+b+", account: a1, status: shipped}\n", 1)
	}
	for _, tc := range []struct{ a, b string }{{"S-100", "s-100"}, {"S-100", "\u017f-100"}} { // ſ folds to s and S
		_, err := load(t, map[string]string{"shop.yaml": withIDs(tc.a, tc.b)})
		if want := "order " + tc.b + " is listed twice (also as " + tc.a + ")"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("records %s and %s: %v, want %q", tc.a, tc.b, err, want)
		}
	}

	bs, err := brand.Load(recordsDir(t, 2000))
	if err != nil {
		t.Fatal(err)
	}
	rt, ctx := bs["shop"].RecordType("order"), context.Background()
	for _, tc := range []struct{ id, want string }{
		{"S-0000000", "S-0000000"}, {"s-0001999", "S-0001999"}, {"\u017f-0000042", "S-0000042"}, {"S-0002000", ""}, {"S-1", ""},
	} {
		r, err := rt.Lookup(ctx, tc.id)
		if err != nil || r.ID() != tc.want || (r != nil && r["status"] != "shipped") {
			t.Errorf("Lookup(%s) = %v, %v; want %q", tc.id, r, err, tc.want)
		}
	}
}
