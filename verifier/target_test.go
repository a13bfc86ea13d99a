package verifier_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/verifier"
)

// namesTargetDecoding is NamesTarget as the dispute drill first wrote it,
// decoding the args into a map: the reference NamesTarget must agree
// with.
func namesTargetDecoding(argsJSON, target string) bool {
	d := json.NewDecoder(strings.NewReader(argsJSON))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return false
	}
	var names func(v any) bool
	names = func(v any) bool {
		switch v := v.(type) {
		case string:
			return v == target
		case json.Number:
			return v.String() == target
		case []any:
			return slices.ContainsFunc(v, names)
		case map[string]any:
			for _, e := range v {
				if names(e) {
					return true
				}
			}
		}
		return false
	}
	return names(v)
}

var namesTargetCases = []struct {
	args, target string
	want         bool
}{
	{`{"order":"A-5531"}`, "A-5531", true},
	{`{"order":"A-5531"}`, "B-8888", false},
	{`{"order":"A-5531","merge_into":"B-8888"}`, "B-8888", true},
	{`{"A-5531":"x"}`, "A-5531", false},
	{`{"order":{"id":"A-77","lines":[1,2]}}`, "A-77", true},
	{`{"ids":["x","A-77"]}`, "A-77", true},
	{`{"n":77}`, "77", true},
	{`{"n":77.0}`, "77", false},
	{`{"n":7e1}`, "7e1", true},
	{`{"order":"A-55311"}`, "A-5531", false},
	{`{"order":"\u0041-5531"}`, "A-5531", true},
	{`{"order":"A\/5531"}`, "A/5531", true},
	{`{"order":"A-5531"`, "A-5531", false},
	{`{"order":"A-5531"} trailing`, "A-5531", true},
	{`{"order":"A-5531",}`, "A-5531", false},
	{`{"order":A-5531}`, "A-5531", false},
	{`"A-5531"`, "A-5531", true},
	{` "A-5531" `, "A-5531", true},
	{`77`, "77", true},
	{`77x`, "77", true},
	{`"A-5531" x`, "A-5531", true},
	{`null`, "null", false},
	{`[true,false,null,"A-5531"]`, "A-5531", true},
	{`[tru,"A-5531"]`, "A-5531", false},
	{`{"a":"x\u0000y"}`, "x\x00y", true},
	{"{\"a\":\"x\ty\"}", "x\ty", false},
	{`{"a":"\ud800"}`, "\uFFFD", true},
	{"[\"\xff\"]", "\uFFFD", true},
	{"{\"order\":\"A-5531\",\"note\":\"\xff\"}", "\uFFFD", true},
	{`{"a":"\u0041\u002d\u0035\u0035\u0033\u0031"}`, "A-5531", true},
	{`{"a":"` + strings.Repeat(`\n`, 100) + `"}`, "A", false},
	{``, "", false},
	{`{"a":""}`, "", true},
	{`[01]`, "01", false},
	{`[-0.5e+3]`, "-0.5e+3", true},
	{strings.Repeat("[", 10000) + `"A"` + strings.Repeat("]", 10000), "A", true},
	{strings.Repeat("[", 10001) + `"A"` + strings.Repeat("]", 10001), "A", false},
}

// NamesTarget answers as decoding the args does: a string value or a
// number written as the target, at any depth, and nothing in args that
// are not JSON.
func TestNamesTarget(t *testing.T) {
	for _, c := range namesTargetCases {
		if got := verifier.NamesTarget(c.args, c.target); got != c.want {
			t.Errorf("NamesTarget(%.60q, %q) = %v; want %v", c.args, c.target, got, c.want)
		}
		if ref := namesTargetDecoding(c.args, c.target); ref != c.want {
			t.Errorf("the decoding reference says %v for %.60q, %q; the case wants %v", ref, c.args, c.target, c.want)
		}
	}
}

func FuzzNamesTarget(f *testing.F) {
	for _, c := range namesTargetCases {
		if len(c.args) < 200 {
			f.Add(c.args, c.target)
		}
	}
	f.Fuzz(func(t *testing.T, args, target string) {
		if got, want := verifier.NamesTarget(args, target), namesTargetDecoding(args, target); got != want {
			t.Fatalf("NamesTarget(%q, %q) = %v; decoding the args says %v", args, target, got, want)
		}
	})
}

// BenchmarkNamesTarget measures the check on the write path of each
// action: typical args that name the target, args that do not (the
// prefilter's case) and args with an escape. "decode" is the map decoding
// the drill used before, the baseline.
func BenchmarkNamesTarget(b *testing.B) {
	cases := []struct{ name, args, target string }{
		{"names", `{"order":"A-5531","reason":"customer asked to cancel","items":[{"sku":"SKU-1","qty":2}],"refund":true}`, "A-5531"},
		{"other", `{"order":"A-5531","reason":"customer asked to cancel","items":[{"sku":"SKU-1","qty":2}],"refund":true}`, "B-8888"},
		{"escaped", `{"order":"A-5531","note":"said \"cancel\"","items":[{"sku":"SKU-1","qty":2}]}`, "B-8888"},
	}
	for _, c := range cases {
		for _, impl := range []struct {
			name string
			f    func(string, string) bool
		}{{"decode", namesTargetDecoding}, {"scan", verifier.NamesTarget}} {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					impl.f(c.args, c.target)
				}
			})
		}
	}
}
