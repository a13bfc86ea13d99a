package brand_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/retention"
)

// shop is a small valid brand file; cases edit it.
const shop = `id: shop
name: Shop Support
scopes:
  - id: orders:read
    description: See your orders
  - id: orders:cancel
    description: Cancel an order
accounts:
  - {id: a1, email: a@x.io}
records:
  - type: order
    idPattern: "S-[0-9]{3}"
    fields: [status]
    items:
      - {id: S-100, account: a1, status: processing}
tools:
  - name: lookup
    scope: orders:read
    retention: read_only
  - name: cancel
    scope: orders:cancel
    retention: money_moved
    set: {status: cancelled}
intents:
  - tool: cancel
    words: [cancel]
    reply: "Order {{.id}} is {{.status}}."
  - tool: lookup
    reply: "Order {{.id}} is {{.status}}."
`

func load(t *testing.T, files map[string]string) (map[string]*brand.Brand, error) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return brand.Load(dir)
}

func TestLoadDefaultsAndOrder(t *testing.T) {
	brands, err := load(t, map[string]string{"shop.yaml": shop})
	if err != nil {
		t.Fatal(err)
	}
	b := brands["shop"]
	if b.Version != "0.1.0" || b.Organization != "Shop Support" || b.WithoutToken != brand.Chat {
		t.Fatalf("defaults: %q %q %q", b.Version, b.Organization, b.WithoutToken)
	}
	if got := b.CardOrder([]string{"orders:cancel", "x:y", "orders:read", "orders:cancel"}); !reflect.DeepEqual(got, []string{"orders:read", "orders:cancel", "x:y"}) {
		t.Fatalf("card order %v", got)
	}
}

// Every mistake names the file, the line and the field.
func TestValidationNamesFileLineAndField(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           string // file:line: field: ...
	}{
		{"unknown field", "name: Shop Support\n", "name: Shop Support\ncolour: red\n", "shop.yaml:3: field colour not found"},
		{"bad id", "id: shop\n", "id: Bad_ID\n", "shop.yaml:1: id:"},
		{"duplicate scope", "  - id: orders:cancel\n", "  - id: orders:read\n", "shop.yaml:6: scopes[1].id: scope orders:read is listed twice"},
		{"scope without description", "    description: Cancel an order\n", "", "shop.yaml:6: scopes[1].description:"},
		{"bad id pattern", `idPattern: "S-[0-9]{3}"`, `idPattern: "S-[0-9"`, "shop.yaml:12: records[0].idPattern:"},
		{"record id off pattern", "{id: S-100,", "{id: X-1,", "shop.yaml:15: records[0].items[0].id: \"X-1\" does not match"},
		{"unknown account", "account: a1, status", "account: nobody, status", "shop.yaml:15: records[0].items[0].account:"},
		{"unknown record field", "status: processing}", "status: processing, colour: red}", "shop.yaml:15: records[0].items[0].colour: order has no field colour"},
		{"reserved field", "fields: [status]", "fields: [status, args]", "shop.yaml:13: records[0].fields[1]:"},
		{"tool scope not on the card", "    scope: orders:cancel\n    retention", "    scope: orders:refund\n    retention", "shop.yaml:21: tools[1].scope: \"orders:refund\" is not among the brand's scopes"},
		{"bad retention", "retention: money_moved", "retention: forever", "shop.yaml:22: tools[1].retention:"},
		{"read only sets", "retention: money_moved\n    set", "retention: read_only\n    set", "shop.yaml:23: tools[1].set: a read_only tool changes nothing"},
		{"set unknown field", "set: {status: cancelled}", "set: {colour: red}", "shop.yaml:23: tools[1].set.colour:"},
		{"unknown tool", "  - tool: cancel\n", "  - tool: launch_rocket\n", "shop.yaml:25: intents[0].tool: \"launch_rocket\" is not one of the brand's tools"},
		{"blank word", "words: [cancel]", "words: [' ']", "shop.yaml:26: intents[0].words[0]: blank word"},
		{"bad pattern", "words: [cancel]", "patterns: ['(']", "shop.yaml:26: intents[0].patterns[0]:"},
		{"words and patterns without prompt", "words: [cancel]", "words: [cancel]\n    patterns: ['cancel (?P<why>.+)']", "shop.yaml:25: intents[0].prompt:"},
		{"template names a missing field", "    reply: \"Order {{.id}} is {{.status}}.\"\n  - tool: lookup", "    reply: \"Order {{.id}} is {{.colour}}.\"\n  - tool: lookup", "shop.yaml:27: intents[0].reply: template names something"},
		{"template syntax", "    reply: \"Order {{.id}} is {{.status}}.\"\n  - tool: lookup", "    reply: \"Order {{.id\"\n  - tool: lookup", "shop.yaml:27: intents[0].reply: template:"},
		{"two fallbacks", "  - tool: cancel\n    words: [cancel]\n", "  - tool: lookup\n    reply: x\n  - tool: cancel\n    words: [cancel]\n", "shop.yaml:30: intents[2]: at most one intent"},
		{"changing tool's args without the record", "    words: [cancel]\n    reply", "    words: [cancel]\n    args: {reason: \"{{.status}}\"}\n    reply", "shop.yaml:27: intents[0].args: the tool cancel changes records: one of the args must name the record"},
		{"fallback changes", "  - tool: lookup\n    reply", "  - tool: cancel\n    reply", "shop.yaml:28: intents[1].tool: the intent without words"},
		{"bad policy", "name: Shop Support\n", "name: Shop Support\nwithoutToken: maybe\n", "shop.yaml:3: withoutToken:"},
		{"delegation without login", "name: Shop Support\n", "name: Shop Support\ndelegation: true\n", "shop.yaml:3: delegation: delegation needs a login"},
		{"items and source", "    items:\n", "    source: x.json\n    items:\n", "shop.yaml:14: records[0].source: give items or a source"},
		{"source outside", "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: ../x.json\n", "shop.yaml:14: records[0].source:"},
		{"http source without id", "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: https://shop.example/orders\n", "shop.yaml:14: records[0].source: an https URL"},
		{"plain http source", "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: http://shop.example/orders/{id}\n", "shop.yaml:14: records[0].source: an https URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(shop, tc.old) {
				t.Fatalf("the case edits %q, not in the file", tc.old)
			}
			_, err := load(t, map[string]string{"shop.yaml": strings.Replace(shop, tc.old, tc.new, 1)})
			if err == nil {
				t.Fatal("loaded")
			}
			var fe *brand.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%v: not a FieldError", err)
			}
			if got := err.Error(); !strings.Contains(got, tc.want) || !strings.Contains(got, string(filepath.Separator)+"shop.yaml") {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestTwoFilesOneID(t *testing.T) {
	_, err := load(t, map[string]string{"a.yaml": shop, "b.yaml": shop})
	if err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Fatalf("%v", err)
	}
	if _, err := load(t, nil); err == nil {
		t.Fatal("an empty directory loaded")
	}
}

// A brand file spelled .yml is read like one spelled .yaml, not left out
// unseen; another file in the directory is not a brand file.
func TestBothSpellingsOfTheExtensionAreRead(t *testing.T) {
	other := strings.Replace(shop, "id: shop", "id: bikes", 1)
	brands, err := load(t, map[string]string{"shop.yaml": shop, "bikes.yml": other, "notes.txt": "not a brand"})
	if err != nil {
		t.Fatal(err)
	}
	if len(brands) != 2 || brands["shop"] == nil || brands["bikes"] == nil {
		t.Fatalf("brands %v, want shop and bikes", slices.Sorted(maps.Keys(brands)))
	}
	if _, err := load(t, map[string]string{"a.yaml": shop, "b.yml": shop}); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Fatalf("one id in a .yaml and a .yml file: %v", err)
	}
}

// Records may live in a JSON or YAML file beside the brand file; its
// mistakes name that file and line.
func TestRecordsFromAFile(t *testing.T) {
	file := strings.Replace(shop, "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: orders.json\n", 1)
	brands, err := load(t, map[string]string{"shop.yaml": file, "orders.json": "[\n{\"id\": \"S-100\", \"account\": \"a1\", \"status\": \"shipped\"}\n]\n"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := brands["shop"].RecordType("order").Lookup(context.Background(), "s-100")
	if err != nil || rec["status"] != "shipped" {
		t.Fatalf("%v %v", rec, err)
	}
	_, err = load(t, map[string]string{"shop.yaml": file, "orders.json": "[\n{\"id\": \"S-100\", \"account\": \"a1\"},\n{\"id\": \"S-101\", \"account\": \"zed\"}\n]\n"})
	if err == nil || !strings.Contains(err.Error(), "orders.json:3: [1].account:") {
		t.Fatalf("%v", err)
	}
}

// Records may come from the business's own endpoint, one GET per id.
func TestRecordsFromAnEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/orders/S-100":
			_, _ = w.Write([]byte(`{"id":"S-100","account":"a1","status":"shipped","extra":{"x":1}}`))
		case "/orders/S-500":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	file := strings.Replace(shop, "    items:\n      - {id: S-100, account: a1, status: processing}\n", "    source: "+srv.URL+"/orders/{id}\n", 1)
	brands, err := load(t, map[string]string{"shop.yaml": file})
	if err != nil {
		t.Fatal(err)
	}
	rt := brands["shop"].RecordType("order")
	ctx := context.Background()
	if rec, err := rt.Lookup(ctx, "S-100"); err != nil || !reflect.DeepEqual(rec, brand.Record{"id": "S-100", "account": "a1", "status": "shipped"}) {
		t.Fatalf("%v %v", rec, err)
	}
	if rec, err := rt.Lookup(ctx, "S-404"); err != nil || rec != nil {
		t.Fatalf("unknown id: %v %v", rec, err)
	}
	if _, err := rt.Lookup(ctx, "S-500"); !errors.Is(err, brand.ErrSource) {
		t.Fatalf("failing source: %v", err)
	}
	if rec, err := rt.Lookup(ctx, "../admin"); err != nil || rec != nil {
		t.Fatalf("an id off the pattern is not fetched: %v %v", rec, err)
	}
}

func TestMatch(t *testing.T) {
	brands, err := load(t, map[string]string{"shop.yaml": strings.Replace(shop, "    words: [cancel]\n",
		"    words: [cancel]\n    patterns: ['(?i)cancel (?P<order>S-[0-9]+) because (?P<why>.+)']\n    prompt: Why?\n", 1)})
	if err != nil {
		t.Fatal(err)
	}
	b := brands["shop"]
	tests := []struct {
		text, tool string
		groups     map[string]string
		needsMore  bool
	}{
		{"Cancel S-100 because it is late", "cancel", map[string]string{"order": "S-100", "why": "it is late"}, false},
		{"please CANCEL it", "cancel", map[string]string{"order": "", "why": ""}, true},
		{"where is S-100?", "lookup", map[string]string{}, false},
	}
	for _, tc := range tests {
		m := b.Match(tc.text)
		if m == nil || m.Tool.Name != tc.tool || !reflect.DeepEqual(m.Groups, tc.groups) || m.NeedsMore != tc.needsMore {
			t.Errorf("Match(%q) = %+v", tc.text, m)
		}
	}
	if rt, id := b.FindRecordID("is s-100 late?"); rt == nil || id != "s-100" {
		t.Errorf("FindRecordID: %v %q", rt, id)
	}
}

// The retention classes reach the ledger's tables: each tool's class, and
// each scope the longest class of the tools needing it; across brands the
// class the configured periods keep longest, with the disagreement told.
func TestRetentionTables(t *testing.T) {
	other := strings.NewReplacer("id: shop", "id: other", "retention: money_moved", "retention: account_changed", "name: lookup", "name: look", "tool: lookup", "tool: look").Replace(shop)
	brands, err := load(t, map[string]string{"shop.yaml": shop, "other.yaml": other})
	if err != nil {
		t.Fatal(err)
	}
	defaults := retention.DefaultPolicy()
	tools, scopes := brands["shop"].Retention(defaults)
	if !reflect.DeepEqual(tools, map[string]retention.Class{"lookup": retention.ReadOnly, "cancel": retention.MoneyMoved}) ||
		!reflect.DeepEqual(scopes, map[string]retention.Class{"orders:read": retention.ReadOnly, "orders:cancel": retention.MoneyMoved}) {
		t.Fatalf("shop: %v %v", tools, scopes)
	}
	tools, scopes = brand.Retention(brands)
	if tools["cancel"] != retention.MoneyMoved || scopes["orders:cancel"] != retention.MoneyMoved || tools["look"] != retention.ReadOnly || tools["lookup"] != retention.ReadOnly {
		t.Fatalf("merged: %v %v", tools, scopes)
	}

	accountLonger := retention.DefaultPolicy()
	accountLonger.Periods[retention.AccountChanged] = retention.Period{Months: 36}
	var got []string
	for _, f := range brand.Merge(brands, accountLonger) {
		got = append(got, fmt.Sprintf("%s %s %s %v [%s]", f.Kind, f.Name, f.Class, f.Disagree(), f.BrandClasses()))
	}
	want := []string{
		"tool cancel account_changed true [other: account_changed, shop: money_moved]",
		"tool look read_only false [other: read_only]",
		"tool lookup read_only false [shop: read_only]",
		"scope orders:cancel account_changed true [other: account_changed, shop: money_moved]",
		"scope orders:read read_only false [other: read_only, shop: read_only]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged with account_changed kept 36 months:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f := brand.Merge(brands, defaults)[0]
	if f.Name != "cancel" || f.Class != retention.MoneyMoved || !reflect.DeepEqual(f.ShorterThan(retention.MoneyMoved, defaults), []string{"other"}) {
		t.Fatalf("with the default periods: %+v, shorter %v", f, f.ShorterThan(retention.MoneyMoved, defaults))
	}

	// Within one brand too, a scope takes the class of its tools that the
	// periods keep longest.
	both := strings.Replace(shop, "    set: {status: cancelled}\n", "    set: {status: cancelled}\n  - name: close\n    scope: orders:cancel\n    retention: account_changed\n    set: {status: closed}\n", 1)
	brands, err = load(t, map[string]string{"shop.yaml": both})
	if err != nil {
		t.Fatal(err)
	}
	if _, scopes := brands["shop"].Retention(accountLonger); scopes["orders:cancel"] != retention.AccountChanged {
		t.Fatalf("one brand, account_changed kept 36 months: %v", scopes)
	}
	if _, scopes := brands["shop"].Retention(defaults); scopes["orders:cancel"] != retention.MoneyMoved {
		t.Fatalf("one brand, default periods: %v", scopes)
	}
}
