package move

import "testing"

// StopBefore makes every move until t ends fail with err just before
// the step that completes a move named step ("mark the file", "record
// the verification"), as a crash there would stop it.
func StopBefore(t testing.TB, step string, err error) {
	beforeStep = func(name string) error {
		if name == step {
			return err
		}
		return nil
	}
	t.Cleanup(func() { beforeStep = nil })
}

// OnStep calls f just before each step that completes a move, until t
// ends; an error from f stops the move there.
func OnStep(t testing.TB, f func(name string) error) {
	beforeStep = f
	t.Cleanup(func() { beforeStep = nil })
}
