package s3

// SetMaxObject sets the largest object Get reads, for the tests of
// package s3_test, and returns a function that puts it back.
func SetMaxObject(n int64) (restore func()) {
	old := maxObject
	maxObject = n
	return func() { maxObject = old }
}
