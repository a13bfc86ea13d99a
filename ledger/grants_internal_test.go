package ledger

import (
	"fmt"
	"reflect"
	"testing"
)

// TestDistinctBound: a list of distinct values keeps each value once, in
// the order first seen, and stops at MaxGrantListBytes, saying so.
func TestDistinctBound(t *testing.T) {
	var d distinct
	d.add("b", "", "a", "b", "a")
	if want := []string{"b", "a"}; !reflect.DeepEqual(d.list, want) || d.cut {
		t.Fatalf("list %q, cut %v; want %q, not cut", d.list, d.cut, want)
	}
	for i := 0; !d.cut; i++ {
		d.add(fmt.Sprintf("scope-%08d", i))
	}
	if d.bytes > MaxGrantListBytes || len(d.seen) != len(d.list) {
		t.Fatalf("after the bound: %d bytes (bound %d), %d seen, %d listed", d.bytes, MaxGrantListBytes, len(d.seen), len(d.list))
	}
	n := len(d.list)
	d.add("a", "scope-00000000") // already listed: no change
	if len(d.list) != n {
		t.Fatalf("a value already listed was added again")
	}
}
