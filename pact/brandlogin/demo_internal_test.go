package brandlogin

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// However many emails fail within a lockout, no more than
// maxTrackedFailures are counted, and the latest are.
func TestLoginFailuresAreBounded(t *testing.T) {
	d, err := newDemoLogin()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	pad := strings.Repeat("x", 300)
	for i := range 3 * maxTrackedFailures {
		d.fail(fmt.Sprintf("%s-%d@example.com", pad, i), now.Add(time.Duration(i)*30*time.Millisecond))
	}
	if n := len(d.failures); n > maxTrackedFailures {
		t.Fatalf("%d emails counted, want at most %d", n, maxTrackedFailures)
	}
	if _, ok := d.failures[fmt.Sprintf("%s-%d@example.com", pad, 3*maxTrackedFailures-1)]; !ok {
		t.Fatal("the latest failure was not counted")
	}
}

// Counts whose lockout has passed are forgotten first; at the bound, the
// oldest of those with the fewest failures goes, lockouts last.
func TestLoginFailuresForgetTheFewestFirst(t *testing.T) {
	d, err := newDemoLogin()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	for i := range MaxLoginFailures {
		d.fail("locked@example.com", now.Add(time.Duration(i)*time.Second))
	}
	d.fail("two@example.com", now)
	d.fail("two@example.com", now)
	d.fail("one@example.com", now)
	for i := range maxTrackedFailures - 3 {
		d.fail(fmt.Sprintf("u%d@example.com", i), now.Add(time.Minute))
	}
	d.fail("new@example.com", now.Add(2*time.Minute))
	if got, want := len(d.failures), maxTrackedFailures; got != want {
		t.Fatalf("%d emails counted, want %d", got, want)
	}
	if !d.locked("locked@example.com", now.Add(2*time.Minute)) {
		t.Fatal("a lockout was forgotten at the bound")
	}
	if _, ok := d.failures["one@example.com"]; ok {
		t.Fatal("the oldest count of one failure was kept at the bound")
	}
	for _, k := range []string{"two@example.com", "new@example.com", "u0@example.com"} {
		if _, ok := d.failures[k]; !ok {
			t.Fatalf("%s forgotten at the bound", k)
		}
	}
	n := 0
	for i := range d.byCount {
		n += d.byCount[i].Len()
	}
	if n != len(d.failures) {
		t.Fatalf("%d counts in the lists, %d by email", n, len(d.failures))
	}

	// Full of lockouts, the oldest goes.
	d, err = newDemoLogin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxTrackedFailures {
		for range MaxLoginFailures {
			d.fail(fmt.Sprintf("l%d@example.com", i), now.Add(time.Duration(i)*time.Millisecond))
		}
	}
	d.fail("new@example.com", now.Add(time.Minute))
	if d.locked("l0@example.com", now.Add(time.Minute)) || !d.locked("l1@example.com", now.Add(time.Minute)) {
		t.Fatal("full of lockouts, the oldest was not the one forgotten")
	}
	if got, want := len(d.failures), maxTrackedFailures; got != want {
		t.Fatalf("%d emails counted, want %d", got, want)
	}
	// Once the lockouts have passed, a new email drops them all.
	d.fail("late@example.com", now.Add(time.Hour))
	if got := len(d.failures); got != 1 {
		t.Fatalf("%d emails counted after every lockout passed, want the new one alone", got)
	}
}
