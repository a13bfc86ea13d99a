// Package batch is the loop of a group commit: it takes requests from a
// channel in batches and hands each batch to one commit.
package batch

// Loop takes the requests waiting on reqs, at most max at a time (at
// least one), and calls commit with each batch, until quit is closed;
// then it commits what is still queued, one request at a time, and
// returns. A batch is what waited while the commit before ran, so it
// grows with the load and a lone request is never held back.
func Loop[T any](reqs <-chan T, quit <-chan struct{}, max int, commit func([]T)) {
	for {
		var first T
		select {
		case first = <-reqs:
		case <-quit:
			for {
				select {
				case r := <-reqs:
					commit([]T{r})
				default:
					return
				}
			}
		}
		batch := []T{first}
	fill:
		for len(batch) < max {
			select {
			case r := <-reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		commit(batch)
	}
}
