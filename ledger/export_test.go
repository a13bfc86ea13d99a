package ledger

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/pactledger/pactledger/verifier"
)

// SetMaxGrantRows sets how many rows Grant reads; the returned func
// restores it.
func SetMaxGrantRows(n int) (restore func()) {
	prev := maxGrantRows
	maxGrantRows = n
	return func() { maxGrantRows = prev }
}

// SetMaxRevocationsRead sets how many revocations a page of
// ListRevocations reads; the returned func restores it.
func SetMaxRevocationsRead(n int) (restore func()) {
	prev := maxRevocationsRead
	maxRevocationsRead = n
	return func() { maxRevocationsRead = prev }
}

// SetSweepHook makes fn run between a sweep's decision and its deleting
// transaction; the returned func restores the previous hook.
func SetSweepHook(fn func()) (restore func()) {
	prev := sweepHook
	sweepHook = fn
	return func() { sweepHook = prev }
}

// SetLeaseHook makes fn hear when a job starts (held) and stops under a
// lease; the returned func restores the previous hook.
func SetLeaseHook(fn func(name, holder string, held bool)) (restore func()) {
	prev := leaseHook
	leaseHook = fn
	return func() { leaseHook = prev }
}

// SetSlowPublication sets how long a publication of the log runs before
// the integrator says it waits; the returned func restores it.
func SetSlowPublication(d time.Duration) (restore func()) {
	prev := slowPublication
	slowPublication = d
	return func() { slowPublication = prev }
}

// SetIntegrateHook makes fn run between preparing a round of the log and
// storing it; the returned func restores the previous hook.
func SetIntegrateHook(fn func()) (restore func()) {
	prev := integrateHook
	integrateHook = fn
	return func() { integrateHook = prev }
}

// SetCheckedHook makes fn run between the integrator's check of the
// published log and its second read of the row store's head; the
// returned func restores the previous hook.
func SetCheckedHook(fn func()) (restore func()) {
	prev := checkedHook
	checkedHook = fn
	return func() { checkedHook = prev }
}

// UploaderIntervalOf is the interval an uploader run with c keeps.
func UploaderIntervalOf(c UploaderConfig) time.Duration { return c.withDefaults().Interval }

// UploadRoundWith runs one upload round with c (defaults filled in).
func (l *Ledger) UploadRoundWith(ctx context.Context, c UploaderConfig) (int, error) {
	return l.uploadRound(ctx, c.withDefaults())
}

// ErrClaimRanOut is the error of a round whose claim ran out.
var ErrClaimRanOut = errClaimRanOut

// CountParses counts the parses of inputs' tokens (ReceiptInput.Parse,
// as AppendReceipt calls it) until restore is called.
func CountParses() (n func() int64, restore func()) {
	var count atomic.Int64
	prev := parseInput
	parseInput = func(in verifier.Input) *verifier.Parsed {
		count.Add(1)
		return prev(in)
	}
	return count.Load, func() { parseInput = prev }
}

// SetMaxIncidentDayRows sets the most rows of a day Incident reads, and
// returns a func that restores it.
func SetMaxIncidentDayRows(n int) (restore func()) {
	prev := maxIncidentDayRows
	maxIncidentDayRows = n
	return func() { maxIncidentDayRows = prev }
}

// SetSweepPaging sets how many items a sweep lists and how many due rows
// it reads at a time, and returns a func that restores them.
func SetSweepPaging(listed, page int) (restore func()) {
	prevListed, prevPage := maxReported, sweepPage
	maxReported, sweepPage = listed, page
	return func() { maxReported, sweepPage = prevListed, prevPage }
}

// SetSweepClockRetry sets how soon a sweep its clock stopped is tried
// again.
func SetSweepClockRetry(d time.Duration) (restore func()) {
	old := sweepClockRetry
	sweepClockRetry = d
	return func() { sweepClockRetry = old }
}
