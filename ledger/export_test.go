package ledger

// SetSweepHook makes fn run between a sweep's decision and its deleting
// transaction; the returned func restores the previous hook.
func SetSweepHook(fn func()) (restore func()) {
	prev := sweepHook
	sweepHook = fn
	return func() { sweepHook = prev }
}
