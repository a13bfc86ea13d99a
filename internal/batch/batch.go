// Package batch is the loop of a group commit: it takes requests from a
// channel in batches and hands each batch to one commit.
package batch

import "time"

// Loop takes the requests waiting on reqs, at most max at a time (at
// least one), and calls commit with each batch, until quit is closed;
// then it commits what is still queued and returns. A batch is what
// waited while the commit before ran, so it grows with the load.
//
// With linger above zero, a batch waits up to linger for more requests
// before it commits when others are writing too: it holds more than one
// request, or its first was already waiting when the commit before ended.
// So does PostgreSQL's commit_delay: at a moderate rate a commit otherwise
// carries a few requests, and its fixed cost (pages rewritten, fsync) is
// shared by few. A lone request that finds the loop idle commits at once.
func Loop[T any](reqs <-chan T, quit <-chan struct{}, max int, linger time.Duration, commit func([]T)) {
	for {
		var first T
		busy := true
		select {
		case first = <-reqs:
		default:
			busy = false
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
		if linger > 0 && (busy || len(batch) > 1) && len(batch) < max {
			batch = wait(batch, reqs, quit, max, linger)
		}
		commit(batch)
	}
}

// wait adds to batch what arrives on reqs within linger, until batch holds
// max or quit is closed.
func wait[T any](batch []T, reqs <-chan T, quit <-chan struct{}, max int, linger time.Duration) []T {
	t := time.NewTimer(linger)
	defer t.Stop()
	for len(batch) < max {
		select {
		case r := <-reqs:
			batch = append(batch, r)
		case <-t.C:
			return batch
		case <-quit:
			return batch
		}
	}
	return batch
}
