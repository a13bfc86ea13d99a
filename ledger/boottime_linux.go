package ledger

import (
	"time"

	"golang.org/x/sys/unix"
)

// sinceBoot is the host's boot-time clock (CLOCK_BOOTTIME): it does not
// step with the wall clock, and unlike the monotonic clock it counts the
// time the host was suspended, so a suspended VM's wall clock, which
// moved on meanwhile, is not seen as a step.
func sinceBoot() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return sinceStart()
	}
	return time.Duration(ts.Nano())
}
