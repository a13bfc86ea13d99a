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
