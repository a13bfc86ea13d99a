// Package testseam holds values that only tests set: no configuration
// reaches them, and code outside this module cannot import them.
package testseam

import "sync/atomic"

var callersOnLoopback atomic.Bool

// CallersOnLoopback reports whether the fetchers of addresses callers name
// (personal agents taken under provider.openAgents) made from now on also
// reach loopback addresses, where tests' servers listen. It is false
// unless a test said otherwise.
func CallersOnLoopback() bool { return callersOnLoopback.Load() }

// SetCallersOnLoopback lets the fetchers of callers' addresses made until
// t ends reach loopback. t is a testing.TB (only its Cleanup is used, so
// that the product does not link the testing package).
func SetCallersOnLoopback(t interface{ Cleanup(func()) }) {
	old := callersOnLoopback.Swap(true)
	t.Cleanup(func() { callersOnLoopback.Store(old) })
}
