package server

import (
	"context"
	"testing"
	"testing/synctest"
)

// The budget lets streams take room in the order they came (one that
// would fit waits behind one that does not), a stream that gives up
// waiting takes nothing, and a receipt larger than the budget is admitted
// when nothing is held.
func TestStreamBudgetTakesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newStreamBudget(100, 16)
		if err := b.take(t.Context(), 80); err != nil {
			t.Fatal(err)
		}
		order := make(chan int, 3)
		ctx, giveUp := context.WithCancel(t.Context())
		go func() {
			if b.take(ctx, 50) == nil {
				order <- 1
			}
		}()
		synctest.Wait()
		go func() { _ = b.take(t.Context(), 30); order <- 2 }() // fits alone, but waits behind 1
		synctest.Wait()
		if held, waiting := b.stats(); held != 80 || waiting != 2 {
			t.Fatalf("held %d, %d waiting; want 80, 2", held, waiting)
		}
		giveUp()
		synctest.Wait()
		if held, waiting := b.stats(); held != 80 || waiting != 1 || len(order) != 0 {
			t.Fatalf("after one gave up: held %d, %d waiting, %d took room; want 80, 1, none", held, waiting, len(order))
		}
		b.add(-80)
		synctest.Wait()
		if got := <-order; got != 2 {
			t.Fatalf("%d took room; want 2, the one left waiting", got)
		}
		b.add(-30)
		go func() { _ = b.take(t.Context(), 500); order <- 3 }() // over the budget, nothing held
		synctest.Wait()
		if held, waiting := b.stats(); held != 500 || waiting != 0 || len(order) != 1 {
			t.Fatalf("held %d, %d waiting; want 500 taken by one receipt larger than the budget", held, waiting)
		}
	})
}
