package bolt

// SetConversionHooks sets the conversion's batch size and the function
// run after each of its transactions, for the tests of package bolt_test,
// and returns a function that puts them back.
func SetConversionHooks(batch int, after func(pass string) error) (restore func()) {
	oldBatch, oldAfter := convertBatch, afterConvertBatch
	convertBatch, afterConvertBatch = batch, after
	return func() { convertBatch, afterConvertBatch = oldBatch, oldAfter }
}
