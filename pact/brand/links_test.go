package brand_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brand"
)

// The Provider reads brand files and record sources inside the brands
// directory only: a symbolic link that leads out of it, to a file or
// through a directory, or that is absolute, is refused at load, naming
// the link; a relative link that stays inside is followed.
func TestALinkOutOfTheBrandsDirectoryIsRefused(t *testing.T) {
	withSource := strings.Replace(shop, "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: %s\n", 1)
	const orders = `[{"id": "S-100", "account": "a1", "status": "secret"}]`
	for _, tc := range []struct {
		name   string
		source string            // the brand file's record source
		links  map[string]string // link in the brands directory: target
		want   string            // in the error; "" for a load
	}{
		{"source to a file outside", "orders.json", map[string]string{"orders.json": "../elsewhere/orders.json"}, `"orders.json": orders.json is a symbolic link to ../elsewhere/orders.json, which leads out of the brands directory`},
		{"source to an absolute path outside", "orders.json", map[string]string{"orders.json": "ABS/elsewhere/orders.json"}, "orders.json is a symbolic link to the absolute path "},
		{"source through a directory outside", "data/orders.json", map[string]string{"data": "../elsewhere"}, `"data/orders.json": data is a symbolic link to ../elsewhere, which leads out of the brands directory`},
		{"brand file outside", "inside.json", map[string]string{"other.yaml": "../elsewhere/other.yaml"}, "other.yaml is a symbolic link to ../elsewhere/other.yaml, which leads out of the brands directory"},
		{"source inside, absolute", "orders.json", map[string]string{"orders.json": "ABS/brands/inside.json"}, "orders.json is a symbolic link to the absolute path "},
		{"source inside", "orders.json", map[string]string{"orders.json": "inside.json"}, ""},
		{"source through a directory inside", "data/inside.json", map[string]string{"data": "."}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir, outside := filepath.Join(root, "brands"), filepath.Join(root, "elsewhere")
			for _, d := range []string{dir, outside} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			files := map[string]string{
				filepath.Join(outside, "orders.json"): orders,
				filepath.Join(outside, "other.yaml"):  strings.Replace(shop, "id: shop", "id: other", 1),
				filepath.Join(dir, "inside.json"):     orders,
				filepath.Join(dir, "shop.yaml"):       strings.Replace(withSource, "%s", tc.source, 1),
			}
			for name, body := range files {
				if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for link, target := range tc.links {
				if err := os.Symlink(strings.Replace(target, "ABS", root, 1), filepath.Join(dir, link)); err != nil {
					t.Fatal(err)
				}
			}
			brands, err := brand.Load(dir)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("load with a link inside the directory: %v", err)
			case tc.want == "":
				if len(brands) != 1 || brands["shop"] == nil {
					t.Fatalf("loaded %v, want shop", brands)
				}
			case err == nil:
				t.Fatalf("loaded %d brands through a link out of the directory", len(brands))
			case !strings.Contains(err.Error(), tc.want):
				t.Fatalf("load: %v, want it to say %q", err, tc.want)
			}
		})
	}
}
