package server

import "testing"

// SetAnswerRowBytes sets the bound on the rows of one read answer until t
// ends.
func SetAnswerRowBytes(t testing.TB, n int) {
	old := answerRowBytes
	answerRowBytes = n
	t.Cleanup(func() { answerRowBytes = old })
}
