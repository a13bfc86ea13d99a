package ledger

import (
	"bytes"
	"testing"
)

// TestEvidenceCacheBoundedByBytes fills a cache of 10 bytes: the least
// recently used bundles go first, a bundle larger than the cache is not
// kept, and a nil cache keeps nothing.
func TestEvidenceCacheBoundedByBytes(t *testing.T) {
	c := newBytesCache(10)
	c.put("a", []byte("aaaa"))
	c.put("b", []byte("bbbb"))
	if c.get("a") == nil { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.put("c", []byte("cccc")) // 12 bytes: b goes
	if c.get("b") != nil || !bytes.Equal(c.get("a"), []byte("aaaa")) || !bytes.Equal(c.get("c"), []byte("cccc")) {
		t.Fatalf("after c: a %q b %q c %q", c.get("a"), c.get("b"), c.get("c"))
	}
	if c.size != 8 {
		t.Fatalf("size %d, want 8", c.size)
	}
	c.put("a", []byte("AA")) // replaced: the size follows
	if c.size != 6 || !bytes.Equal(c.get("a"), []byte("AA")) {
		t.Fatalf("after replacing a: size %d, a %q", c.size, c.get("a"))
	}
	c.put("big", make([]byte, 11))
	if c.get("big") != nil || c.size != 6 {
		t.Fatalf("a bundle larger than the cache was kept (size %d)", c.size)
	}
	var off *bytesCache = newBytesCache(-1)
	off.put("a", []byte("a"))
	if off.get("a") != nil {
		t.Fatal("a cache of no bytes kept a bundle")
	}
}
