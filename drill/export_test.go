package drill

import "testing"

// SetMaxScanned sets how many rows a dispute drill reads, until t ends.
func SetMaxScanned(t testing.TB, n int) {
	old := maxScanned
	maxScanned = n
	t.Cleanup(func() { maxScanned = old })
}

// ClocksOf is clocks, for tests.
var ClocksOf = clocks

// Action is Names.action, for tests.
func (n Names) Action(url string, tools []string, targets string) string {
	return n.action(url, tools, targets)
}

// SetPoolRead sets how many rows the monthly drill reads against the
// drill pool, and how many when the pool is empty, until t ends.
func SetPoolRead(t testing.TB, n, empty int) {
	old, oldEmpty := poolRead, emptyPoolRead
	poolRead, emptyPoolRead = n, empty
	t.Cleanup(func() { poolRead, emptyPoolRead = old, oldEmpty })
}
