package verifier

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// TargetSource says what vouches for a row action's target: the object
// (an order id) the writer's action log files the action under. The
// receipt signs only the args' hash, so the target is the signed args'
// word only where those args name it (docs/design/012).
type TargetSource int

// Target sources. TargetNotRecorded is an action without a target, or a
// row written before the ledger recorded where targets come from.
const (
	TargetNotRecorded TargetSource = iota
	// TargetFromSignedArgs: the args whose hash the receipt lists, and
	// which match it, name the target.
	TargetFromSignedArgs
	// TargetFromWriter: the action log's word alone. The agent did not
	// sign the args (the ledger computed their hash, or none were
	// logged), the logged args are not the signed ones, or the signed
	// args do not name the target.
	TargetFromWriter
)

// maxNesting is encoding/json's bound on the depth of arrays and objects:
// deeper args do not decode, so they name nothing.
const maxNesting = 10000

// NamesTarget reports whether the JSON args name target: a string value
// equal to it, at any depth. Keys do not count, nor do numbers: an
// amount or a quantity written as a numeric order id is not that order
// (order ids are strings in the args of the embedded Provider's tools).
//
// Args that a Provider's decoder may read otherwise than the ledger name
// nothing: args that are not exactly one JSON value (trailing bytes
// besides white space), that are not UTF-8, or with an object holding a
// key twice at any depth (encoding/json acts on the last, other
// decoders on the first; keys equal but for case count as one, as
// encoding/json matches them to a field). Nor does a string holding an
// escape of half a surrogate pair ("\ud800"), which decoders read as
// U+FFFD or refuse.
//
// It runs on the write path of every action with a target, so it reads
// the args without decoding them and without allocating (but for
// objects of many keys, kept in a map): args without the target's
// bytes and without an escape name nothing, and otherwise one scan of
// the tokens compares each string value with target.
func NamesTarget(argsJSON, target string) bool {
	if !strings.Contains(argsJSON, target) && !strings.Contains(argsJSON, `\`) {
		return false
	}
	s := argsScan{in: argsJSON, target: target}
	if !s.value(0) {
		return false
	}
	s.space()
	return s.i == len(s.in) && s.found
}

// maxKeysCompared is how many keys of an object argsScan compares a key
// with, one by one; past it, or past maxKeysHeld keys in the objects
// being read, the object's keys are kept in a map.
const (
	maxKeysCompared = 16
	maxKeysHeld     = 32
)

// argsScan reads one JSON value from in at i, checking its syntax as
// encoding/json does, and sets found when a string value in it is
// target. keys[:held] holds the keys (the bodies of their string
// tokens) of the objects being read, outermost first, but for those of
// an object kept in a map; plain[i] says keys[i] is ASCII without an
// escape, as str says of the token it reads.
type argsScan struct {
	in     string
	i      int
	target string
	found  bool
	keys   [maxKeysHeld]string
	plain  [maxKeysHeld]bool
	held   int
	// strPlain says the last string token str read is ASCII without an
	// escape.
	strPlain bool
}

func (s *argsScan) space() {
	for s.i < len(s.in) {
		switch s.in[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads a value at nesting depth (the arrays and objects around
// it) and reports whether its syntax is valid and its objects hold no
// key twice.
func (s *argsScan) value(depth int) bool {
	s.space()
	if s.i == len(s.in) {
		return false
	}
	switch c := s.in[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		if depth+1 > maxNesting {
			return false
		}
		s.i++
		s.space()
		if s.i < len(s.in) && s.in[s.i] == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.i == len(s.in) {
				return false
			}
			s.i++
			switch s.in[s.i-1] {
			case ',':
			case ']':
				return true
			default:
				return false
			}
		}
	case c == '"':
		v, ok := s.str()
		if ok && !s.found && s.isTarget(v) {
			s.found = true
		}
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// object reads an object at i, as value does, and reports false as well
// for one that holds a key twice.
func (s *argsScan) object(depth int) bool {
	if depth+1 > maxNesting {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.in) && s.in[s.i] == '}' {
		s.i++
		return true
	}
	// A key that fails the scan ends it: first is restored only once
	// the object is read.
	first := s.held
	var many map[string]struct{}
	for {
		s.space()
		k, ok := s.str()
		if !ok {
			return false
		}
		k = k[1 : len(k)-1]
		if many == nil && (s.held-first == maxKeysCompared || s.held == maxKeysHeld) {
			many = make(map[string]struct{})
			for _, o := range s.keys[first:s.held] {
				many[foldedKey(o)] = struct{}{}
			}
		}
		if many != nil {
			f := foldedKey(k)
			if _, dup := many[f]; dup {
				return false
			}
			many[f] = struct{}{}
		} else {
			plain := s.strPlain
			for j, o := range s.keys[first:s.held] {
				if plain && s.plain[first+j] {
					if len(o) == len(k) && asciiEqualFold(o, k) {
						return false
					}
				} else if sameKey(o, k) {
					return false
				}
			}
			s.keys[s.held], s.plain[s.held] = k, plain
			s.held++
		}
		s.space()
		if s.i == len(s.in) || s.in[s.i] != ':' {
			return false
		}
		s.i++
		if !s.value(depth + 1) {
			return false
		}
		s.space()
		if s.i == len(s.in) {
			return false
		}
		s.i++
		switch s.in[s.i-1] {
		case ',':
		case '}':
			s.held = first
			return true
		default:
			return false
		}
	}
}

func (s *argsScan) literal(word string) bool {
	if !strings.HasPrefix(s.in[s.i:], word) {
		return false
	}
	s.i += len(word)
	return true
}

// str reads a string token at i and returns it with its quotes.
func (s *argsScan) str() (string, bool) {
	if s.i == len(s.in) || s.in[s.i] != '"' {
		return "", false
	}
	start := s.i
	s.i++
	s.strPlain = true
	for s.i < len(s.in) {
		c := s.in[s.i]
		switch {
		case c == '"':
			s.i++
			return s.in[start:s.i], true
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			// Args that are not UTF-8 are not JSON (RFC 8259 §8.1):
			// outside strings, such bytes fail the scan anyway.
			s.strPlain = false
			r, n := utf8.DecodeRuneInString(s.in[s.i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			s.i += n
		case c == '\\':
			s.strPlain = false
			s.i++
			if s.i == len(s.in) {
				return "", false
			}
			switch s.in[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					if s.i == len(s.in) || !isHex(s.in[s.i]) {
						return "", false
					}
					s.i++
				}
			default:
				return "", false
			}
		default:
			s.i++
		}
	}
	return "", false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// isTarget reports whether the string token q (with its quotes) is
// target once unescaped, as encoding/json reads it, and holds no escape
// of half a surrogate pair. An escape stands for fewer bytes than it
// takes, a sixth of them at least (\u0041 is "A"), so a string outside
// those bounds is not unescaped at all: a writer's args full of escapes
// cost a scan.
func (s *argsScan) isTarget(q string) bool {
	body := q[1 : len(q)-1]
	if !strings.Contains(body, `\`) {
		return body == s.target
	}
	if len(body) < len(s.target) || len(body) > 6*len(s.target) {
		return false
	}
	t := s.target
	for i := 0; i < len(body); {
		if c := body[i]; c != '\\' {
			if t == "" || t[0] != c {
				return false
			}
			t, i = t[1:], i+1
			continue
		}
		r, next, ok := escaped(body, i)
		if !ok {
			return false
		}
		var b [utf8.UTFMax]byte
		n := utf8.EncodeRune(b[:], r)
		if !strings.HasPrefix(t, string(b[:n])) {
			return false
		}
		t, i = t[n:], next
	}
	return t == ""
}

// escaped reads the escape at i of the body b of a valid string token,
// as encoding/json does, and returns the character it stands for and
// the index after it: a \u escape of the first half of a surrogate pair
// followed by one of the second stands for one character. ok is false
// for an escape of half a pair alone, which encoding/json reads as
// U+FFFD (the character returned).
func escaped(b string, i int) (r rune, next int, ok bool) {
	switch b[i+1] {
	case 'b':
		return '\b', i + 2, true
	case 'f':
		return '\f', i + 2, true
	case 'n':
		return '\n', i + 2, true
	case 'r':
		return '\r', i + 2, true
	case 't':
		return '\t', i + 2, true
	case 'u':
	default: // '"', '\\', '/'
		return rune(b[i+1]), i + 2, true
	}
	r = hex4(b[i+2 : i+6])
	if !utf16.IsSurrogate(r) {
		return r, i + 6, true
	}
	if r < 0xdc00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
		if p := utf16.DecodeRune(r, hex4(b[i+8:i+12])); p != utf8.RuneError {
			return p, i + 12, true
		}
	}
	return utf8.RuneError, i + 6, false
}

// hex4 is the value of four hex digits.
func hex4(h string) rune {
	var r rune
	for i := range 4 {
		c := rune(h[i])
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | c
	}
	return r
}

// keyRune reads the character at i of the body b of a valid string
// token as encoding/json does (half a surrogate pair alone is U+FFFD),
// and returns it folded (foldRune) with the index after it.
func keyRune(b string, i int) (rune, int) {
	c := b[i]
	switch {
	case c == '\\':
		r, next, _ := escaped(b, i)
		return foldRune(r), next
	case c < utf8.RuneSelf:
		return foldRune(rune(c)), i + 1
	}
	r, n := utf8.DecodeRuneInString(b[i:])
	return foldRune(r), i + n
}

// asciiEqualFold reports whether ASCII strings a and b, of one length,
// are equal but for case.
func asciiEqualFold(a, b string) bool {
	for i := range len(a) {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// sameKey reports whether the key bodies a and b are one key to a
// decoder: equal once unescaped, or but for case as encoding/json
// matches a key to a struct field (strings.EqualFold).
func sameKey(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb rune
		ra, i = keyRune(a, i)
		rb, j = keyRune(b, j)
		if ra != rb {
			return false
		}
	}
	return i == len(a) && j == len(b)
}

// foldedKey is key body k unescaped and folded: two keys are sameKey
// when their folded keys are equal.
func foldedKey(k string) string {
	b := make([]byte, 0, len(k))
	for i := 0; i < len(k); {
		var r rune
		r, i = keyRune(k, i)
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

// foldRune is the smallest of the runes equal to r but for case (its
// orbit under unicode.SimpleFold), as encoding/json folds a key.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// number reads a JSON number at i: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *argsScan) number() bool {
	if s.in[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i == len(s.in):
		return false
	case s.in[s.i] == '0':
		s.i++
	case s.in[s.i] >= '1' && s.in[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.in) && s.in[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.in) && (s.in[s.i] == 'e' || s.in[s.i] == 'E') {
		s.i++
		if s.i < len(s.in) && (s.in[s.i] == '+' || s.in[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *argsScan) digits() int {
	n := 0
	for s.i < len(s.in) && s.in[s.i] >= '0' && s.in[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// NamesTargetAsBefore is how the ledger read signed args before
// NamesTarget held ambiguous args and numbers to name nothing: a string
// value, or a number written as target is, at any depth of the first
// JSON value of argsJSON, whatever follows it, an object's key given
// twice and escapes of half a surrogate pair (read as U+FFFD)
// notwithstanding. Rows recorded then hold TargetFromSignedArgs where it
// said so; fsck and VerifyRow read such a row as written, not edited.
// Nothing else uses it: it decodes, and allocates, where NamesTarget
// scans.
func NamesTargetAsBefore(argsJSON, target string) bool {
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
