package server

import (
	"testing"
	"time"
)

// SetAnswerRowBytes sets the bound on the rows, drill reports or access
// records of one read answer until t ends.
func SetAnswerRowBytes(t testing.TB, n int) {
	old := answerRowBytes
	answerRowBytes = n
	t.Cleanup(func() { answerRowBytes = old })
}

// SetGRPCIdleTimeout sets how long an idle gRPC connection is kept, for
// servers started until t ends.
func SetGRPCIdleTimeout(t testing.TB, d time.Duration) {
	old := grpcIdleTimeout
	grpcIdleTimeout = d
	t.Cleanup(func() { grpcIdleTimeout = old })
}

// SetStreamUnreadTimeout sets how long a stream's answer may wait to be
// sent, its writer reading none, until t ends.
func SetStreamUnreadTimeout(t testing.TB, d time.Duration) {
	old := streamUnreadTimeout
	streamUnreadTimeout = d
	t.Cleanup(func() { streamUnreadTimeout = old })
}

// SetLogWaitingShown sets how long leaves wait, the log not growing,
// before /readyz says so, until t ends.
func SetLogWaitingShown(t testing.TB, d time.Duration) {
	old := logWaitingShown
	logWaitingShown = d
	t.Cleanup(func() { logWaitingShown = old })
}
