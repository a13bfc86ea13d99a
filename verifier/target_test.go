package verifier_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pactledger/pactledger/verifier"
)

// namesTargetDecoding is NamesTarget by decoding the args token by
// token: the reference NamesTarget must agree with. Only a string value
// names its target, never a number (UseNumber: a number too large for a
// float64, 1e400, is JSON still). Args name nothing
// unless they are one JSON value in UTF-8 whose objects each hold a key
// once (keys equal but for case, strings.EqualFold, are one key); a
// string value names its target when it decodes to it and holds no
// escape of half a surrogate pair.
func namesTargetDecoding(argsJSON, target string) bool {
	if !utf8.ValidString(argsJSON) {
		return false
	}
	d := json.NewDecoder(strings.NewReader(argsJSON))
	d.UseNumber()
	found := false
	var value func(depth int) bool
	value = func(depth int) bool {
		before := d.InputOffset()
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			if depth == 10000 {
				return false
			}
			var keys []string
			for d.More() {
				if v == '{' {
					k, err := d.Token()
					if err != nil {
						return false
					}
					if slices.ContainsFunc(keys, func(o string) bool { return strings.EqualFold(o, k.(string)) }) {
						return false
					}
					keys = append(keys, k.(string))
				}
				if !value(depth + 1) {
					return false
				}
			}
			if _, err := d.Token(); err != nil {
				return false
			}
		case string:
			raw := strings.TrimLeft(argsJSON[before:d.InputOffset()], " \t\r\n,:")
			if v == target && !halfSurrogate(raw) {
				found = true
			}
		}
		return true
	}
	if !value(0) || strings.Trim(argsJSON[d.InputOffset():], " \t\r\n") != "" {
		return false
	}
	return found
}

// halfSurrogate reports whether string token q holds a \u escape of half
// a surrogate pair without the other half escaped right after it.
func halfSurrogate(q string) bool {
	for i := 0; i < len(q); i++ {
		if q[i] != '\\' {
			continue
		}
		i++
		if q[i] != 'u' {
			continue
		}
		u, _ := strconv.ParseUint(q[i+1:i+5], 16, 16)
		i += 4
		switch {
		case u < 0xd800 || u > 0xdfff:
		case u < 0xdc00 && strings.HasPrefix(q[i+1:], `\u`):
			if l, _ := strconv.ParseUint(q[i+3:i+7], 16, 16); l >= 0xdc00 && l <= 0xdfff {
				i += 6
				continue
			}
			return true
		default:
			return true
		}
	}
	return false
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
	{`{"n":77}`, "77", false},
	{`{"n":77.0}`, "77", false},
	{`{"n":7e1}`, "7e1", false},
	{`{"order":"B-8888","amount":5531}`, "5531", false},
	{`{"order":"B-8888","qty":1}`, "1", false},
	{`{"order":"5531","amount":5531}`, "5531", true},
	{`{"order":"B-8888","amount":"5531"}`, "5531", true},
	{`{"order":"A-55311"}`, "A-5531", false},
	{`{"order":"\u0041-5531"}`, "A-5531", true},
	{`{"order":"A\/5531"}`, "A/5531", true},
	{`{"order":"A-5531"`, "A-5531", false},
	{`{"order":"A-5531"} trailing`, "A-5531", false},
	{`{"order":"A-5531"} {"order":"B-8888"}`, "A-5531", false},
	{`{"order":"A-5531"}` + " \t\r\n", "A-5531", true},
	{`{"order":"A-5531",}`, "A-5531", false},
	{`{"order":A-5531}`, "A-5531", false},
	{`"A-5531"`, "A-5531", true},
	{` "A-5531" `, "A-5531", true},
	{`77`, "77", false},
	{`"77"`, "77", true},
	{`77x`, "77", false},
	{`"A-5531" x`, "A-5531", false},
	{`null`, "null", false},
	{`[true,false,null,"A-5531"]`, "A-5531", true},
	{`[tru,"A-5531"]`, "A-5531", false},
	{`{"a":"x\u0000y"}`, "x\x00y", true},
	{"{\"a\":\"x\ty\"}", "x\ty", false},
	{`{"a":"\ud800"}`, "\uFFFD", false},
	{`{"a":"\udc00"}`, "\uFFFD", false},
	{`{"a":"\ud800\u0041"}`, "\uFFFDA", false},
	{`{"a":"\ud800\ud800"}`, "\uFFFD\uFFFD", false},
	{`{"a":"\ud83d\ude00"}`, "\U0001F600", true},
	{`{"a":"\ufffd"}`, "\uFFFD", true},
	{`{"a":"\uFFFD"}`, "\uFFFD", true},
	{"{\"a\":\"\uFFFD\"}", "\uFFFD", true},
	{"[\"\xff\"]", "\uFFFD", false},
	{"{\"order\":\"A-5531\",\"note\":\"\xff\"}", "A-5531", false},
	{`{"order":"B-8888","order":"A-5531"}`, "A-5531", false},
	{`{"order":"A-5531","order":"B-8888"}`, "A-5531", false},
	{`{"order":"A-5531","order":"A-5531"}`, "A-5531", false},
	{`{"order":"A-5531","Order":"B-8888"}`, "A-5531", false},
	{`{"order":"A-5531","ORDER":"B-8888"}`, "A-5531", false},
	{`{"order":"A-5531","ord\u0065r":"B-8888"}`, "A-5531", false},
	{`{"order":"A-5531","\u004Frder":"B-8888"}`, "A-5531", false},
	{"{\"kind\":1,\"\u212Aind\":2,\"order\":\"A-5531\"}", "A-5531", false},
	{`{"\ud800":1,"\udc00":2,"order":"A-5531"}`, "A-5531", false},
	{`{"order":"A-5531","items":[{"sku":"x","sku":"y"}]}`, "A-5531", false},
	{`{"order":"A-5531","meta":{"a":{"b":1,"b":2}}}`, "A-5531", false},
	{`{"order":"A-5531","a":{"x":1},"b":{"x":1,"order":2}}`, "A-5531", true},
	{`[{"order":"B-8888"},{"order":"A-5531"}]`, "A-5531", true},
	{`{"order":"A-5531","orders":"B-8888","ordre":"x","": 1}`, "A-5531", true},
	{`{"order":"A-5531",` + manyKeys(40, "") + `}`, "A-5531", true},
	{`{"order":"A-5531",` + manyKeys(40, `,"k7":0`) + `}`, "A-5531", false},
	{`{"order":"A-5531",` + manyKeys(40, `,"K39":0`) + `}`, "A-5531", false},
	{`{"order":"A-5531",` + manyKeys(16, `,"k3":0`) + `}`, "A-5531", false},
	{`{"order":"A-5531",` + manyKeys(14, `,"k3":0`) + `}`, "A-5531", false},
	{`{"a":{` + manyKeys(20, "") + `},"b":{` + manyKeys(20, "") + `},"order":"A-5531"}`, "A-5531", true},
	{`{"a":"\u0041\u002d\u0035\u0035\u0033\u0031"}`, "A-5531", true},
	{`{"a":"` + strings.Repeat(`\n`, 100) + `"}`, "A", false},
	{``, "", false},
	{`{"a":""}`, "", true},
	{`[01]`, "01", false},
	{`[-0.5e+3]`, "-0.5e+3", false},
	{`[1e400,"A-5531"]`, "A-5531", true},
	{strings.Repeat("[", 10000) + `"A"` + strings.Repeat("]", 10000), "A", true},
	{strings.Repeat("[", 10001) + `"A"` + strings.Repeat("]", 10001), "A", false},
}

// The cases as the ledger read args before NamesTarget held ambiguous
// args and numbers to name nothing: NamesTargetAsBefore, with which
// fsck reads rows recorded then, still answers them so.
var namesTargetAsBeforeCases = []struct {
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

func TestNamesTargetAsBefore(t *testing.T) {
	more := []struct {
		args, target string
		want         bool
	}{
		{`{"order":"B-8888","order":"A-5531"}`, "A-5531", true},
		{`{"order":"A-5531","Order":"B-8888"}`, "A-5531", true},
		{`{"order":"B-8888","amount":5531}`, "5531", true},
		{`{"order":"B-8888","s":"\ud800"}`, "\uFFFD", true},
		{`{"order":"B-8888"}`, "A-5531", false},
	}
	for _, c := range append(namesTargetAsBeforeCases, more...) {
		if got := verifier.NamesTargetAsBefore(c.args, c.target); got != c.want {
			t.Errorf("NamesTargetAsBefore(%.60q, %q) = %v; want %v", c.args, c.target, got, c.want)
		}
	}
}

// SignedArgs pairs a receipt's actions with the logged ones as Verify
// does, the first unused of the same tool, and gives the args only
// where they are the signed ones.
func TestSignedArgs(t *testing.T) {
	signed := []verifier.ReceiptAction{
		{Tool: "cancel_order", ArgsHash: verifier.ArgsHash(`{"order":"A-1"}`)},
		{Tool: "cancel_order", ArgsHash: verifier.ArgsHash(`{"order":"A-2"}`)},
		{Tool: "lookup_orders"},
		{Tool: "issue_refund", ArgsHash: verifier.ArgsHash(`{"order":"A-4"}`)},
	}
	logged := []verifier.Action{
		{Tool: "cancel_order", Target: "A-1", ArgsJSON: `{"order":"A-1"}`},
		{Tool: "lookup_orders", Target: "A-3", ArgsJSON: `{"order":"A-3"}`},
		{Tool: "cancel_order", Target: "A-2", ArgsJSON: `{"order":"A-9"}`},
	}
	want := []string{`{"order":"A-1"}`, "", "", ""}
	if got := verifier.SignedArgs(signed, logged); !slices.Equal(got, want) {
		t.Errorf("SignedArgs = %q; want %q", got, want)
	}
}

// manyKeys is n distinct keys "k0":0,... followed by more.
func manyKeys(n int, more string) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = `"k` + strconv.Itoa(i) + `":0`
	}
	return strings.Join(keys, ",") + more
}

// NamesTarget answers as decoding the args does: a string value equal
// to the target, at any depth (a number never), and nothing in args that
// are not one JSON value, or that hold a key twice in an object, nor in
// a string with an escape of half a surrogate pair.
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

// NamesTarget allocates nothing for args of the usual shape, whether
// they name the target or not, with escapes or without.
func TestNamesTargetDoesNotAllocate(t *testing.T) {
	for _, c := range []struct{ args, target string }{
		{`{"order":"A-5531","reason":"customer asked to cancel","items":[{"sku":"SKU-1","qty":2}],"refund":true}`, "A-5531"},
		{`{"order":"A-5531","reason":"customer asked to cancel","items":[{"sku":"SKU-1","qty":2}],"refund":true}`, "B-8888"},
		{`{"order":"A-5531","note":"said \"cancel\"","items":[{"sku":"SKU-1","qty":2}]}`, "B-8888"},
		{`{"order":"\u0041-5531","note":"said \"cancel\"","items":[{"sku":"SKU-1","qty":2}]}`, "A-5531"},
		{`{"order":"A-5531",` + manyKeys(14, "") + `}`, "A-5531"},
	} {
		if n := testing.AllocsPerRun(100, func() { verifier.NamesTarget(c.args, c.target) }); n != 0 {
			t.Errorf("NamesTarget(%.60q, %q) allocates %v times", c.args, c.target, n)
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
