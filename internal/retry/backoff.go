package retry

import "time"

// Backoff spaces the attempts of a step retried inside a loop that runs
// more often, so that a step failing for as long as a store is down is
// neither tried nor reported every round: after a failure the step is due
// again Min later, the wait doubling with each failure up to Max, and due
// every round again once it succeeds. The zero value is due at once; set
// Min and Max before the first failure. A Backoff is one loop's own.
type Backoff struct {
	Min, Max time.Duration
	wait     time.Duration
	next     time.Time
	failures int
	since    time.Time
}

// Due reports whether the step should be tried at now.
func (b *Backoff) Due(now time.Time) bool { return !now.Before(b.next) }

// Failed records a failed attempt at now and returns the wait before the
// next and the failures in a row, this one included.
func (b *Backoff) Failed(now time.Time) (retryIn time.Duration, failures int) {
	if b.failures == 0 {
		b.since = now
	}
	b.failures++
	b.wait = min(max(2*b.wait, b.Min), b.Max)
	b.next = now.Add(b.wait)
	return b.wait, b.failures
}

// Postpone makes the step due again Min after now without counting a
// failure: for an attempt that met a state expected to pass soon (a store
// still starting), which is neither reported nor made to wait longer.
func (b *Backoff) Postpone(now time.Time) {
	b.next = now.Add(b.Min)
}

// Succeeded records a successful attempt and returns the failures in a row
// before it and when the first of them was (zero when none were).
func (b *Backoff) Succeeded() (failures int, since time.Time) {
	failures, since = b.failures, b.since
	*b = Backoff{Min: b.Min, Max: b.Max}
	return failures, since
}
