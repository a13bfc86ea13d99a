package config

import "runtime/debug"

// DefaultGCPercent is the garbage collector's target that ledgerd sets
// when GOGC is not in its environment: the heap may grow to five times
// what is live before a collection, instead of Go's default of twice. A
// row's write allocates about 130 KB, most of it short-lived (bbolt's
// nodes, the tokens' parses), while the live heap stays small (tens of
// MiB), so collections are frequent and each one marks the same live
// heap: at 400 % they run a quarter as often. docs/performance.md ("The
// collector's target") has the figures: about 6 % less CPU per row with
// sessions and 8 % with a token per row, for about 2.4 times the
// anonymous memory under load (about 160 against 70 MiB). GOGC (and
// GOMEMLIMIT, which still bounds the heap) set in the environment win.
const DefaultGCPercent = 400

// ApplyGCPercent sets the collector's target to DefaultGCPercent unless
// getenv("GOGC") is set, and reports whether it did.
func ApplyGCPercent(getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(DefaultGCPercent)
	return true
}
