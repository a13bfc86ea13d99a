package bolt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestCompactionKeepsTheFileToItself: while Open converts a file and
// then copies it without its free pages and renames the copy over it, a
// second opener of the same path (a second ledgerd, or `ledgerd migrate
// --from` reading it) waits for the file's lock. It must not be handed
// the old file, gone from the path, when the compaction lets go of it:
// it waits for the copy at the path until the first store closes, and
// then reads what that store wrote.
func TestCompactionKeepsTheFileToItself(t *testing.T) {
	const written = "2026-12-05T00:00:00Z-first"
	for _, tc := range []struct {
		name string
		// open opens path as the second opener does and reports whether
		// it reads the drill report written, with a way to write (a
		// store's; nil for a read-only opener) and to close.
		open func(t *testing.T, path string) (seen bool, write func(id string) error, close func() error, err error)
	}{
		{"store", func(t *testing.T, path string) (bool, func(string) error, func() error, error) {
			s, err := bolt.Open(path, bolt.Config{OpenTimeout: 30 * time.Second})
			if err != nil {
				return false, nil, nil, err
			}
			err = s.View(t.Context(), func(tx ledger.Tx) error {
				_, err := tx.Drill(written)
				return err
			})
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				s.Close()
				return false, nil, nil, err
			}
			return err == nil, func(id string) error { return putDrill(t, s, id) }, s.Close, nil
		}},
		{"export", func(t *testing.T, path string) (bool, func(string) error, func() error, error) {
			ex, err := bolt.OpenExport(path, 30*time.Second)
			if err != nil {
				return false, nil, nil, err
			}
			recs, err := ex.Records(bolt.ExportDrills, nil, 100)
			if err != nil {
				ex.Close()
				return false, nil, nil, err
			}
			seen := false
			for _, r := range recs {
				seen = seen || r.Name == written
			}
			return seen, nil, ex.Close, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := layout1File(t)
			type opened struct {
				seen  bool
				write func(string) error
				close func() error
				err   error
			}
			second := make(chan opened, 1)
			started := false
			restore := bolt.SetConversionHooks(5000, func(string) error {
				if started {
					return nil
				}
				started = true
				// The first store is converting the file, holding it
				// and its lock: the next file opened is the second
				// opener's.
				secondOpened := make(chan struct{}, 1)
				restoreOpened := bolt.SetFileOpened(func(string) {
					select {
					case secondOpened <- struct{}{}:
					default:
					}
				})
				defer restoreOpened()
				go func() {
					var o opened
					o.seen, o.write, o.close, o.err = tc.open(t, path)
					second <- o
				}()
				// The second opener has the file open and waits for its lock.
				select {
				case <-secondOpened:
				case <-time.After(10 * time.Second):
					t.Error("the second opener did not open the file")
				}
				return nil
			})
			first, err := bolt.Open(path, bolt.Config{})
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if !started {
				t.Fatal("the file was not converted: nothing was compacted")
			}
			if err := putDrill(t, first, written); err != nil {
				t.Fatal(err)
			}
			select {
			case o := <-second:
				if o.err == nil {
					o.close()
				}
				t.Fatalf("the second opener got the file while the first store had it open (error %v)", o.err)
			default:
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}

			var o opened
			select {
			case o = <-second:
			case <-time.After(40 * time.Second):
				t.Fatal("the second opener neither opened the file nor failed")
			}
			if o.err != nil {
				t.Fatalf("the second opener, once the first store closed: %v", o.err)
			}
			if !o.seen {
				t.Errorf("the second opener does not read the drill report %s the first store wrote", written)
			}
			if o.write != nil {
				if err := o.write("2026-12-05T00:00:00Z-second"); err != nil {
					t.Fatal(err)
				}
			}
			if err := o.close(); err != nil {
				t.Fatal(err)
			}
			if o.write == nil {
				return
			}
			s := openLinked(t, path)
			for _, id := range []string{written, "2026-12-05T00:00:00Z-second"} {
				err := s.View(t.Context(), func(tx ledger.Tx) error {
					v, err := tx.Drill(id)
					if err == nil && v == nil {
						err = ledger.ErrNotFound
					}
					return err
				})
				if err != nil {
					t.Errorf("drill report %s, written and acknowledged, after a restart: %v", id, err)
				}
			}
		})
	}
}

// putDrill writes a drill report of id through s.
func putDrill(t *testing.T, s *bolt.Store, id string) error {
	return s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill(id, []byte(`{"by":"`+id+`"}`)) })
}
