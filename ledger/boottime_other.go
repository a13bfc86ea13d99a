//go:build !linux

package ledger

import "time"

// sinceBoot is the monotonic clock where the host has no boot-time clock
// ledgerd reads: it does not step with the wall clock, but may not count
// a suspension.
func sinceBoot() time.Duration { return sinceStart() }
