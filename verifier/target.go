package verifier

import (
	"encoding/json"
	"strings"
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

// NamesTarget reports whether the JSON args name target: a string value,
// or a number written as target is, at any depth. Keys do not count, nor
// do args that are not JSON. Only the first JSON value of argsJSON is
// read, as a json.Decoder reads it.
//
// It runs on the write path of every action with a target, so it reads
// the args without decoding them: args without the target's bytes and
// without an escape name nothing, and otherwise one scan of the tokens
// compares each value with target, allocating only to unescape a string.
func NamesTarget(argsJSON, target string) bool {
	// Invalid UTF-8 reads as U+FFFD, so such args are scanned too.
	if !strings.Contains(argsJSON, target) && !strings.Contains(argsJSON, `\`) && utf8.ValidString(argsJSON) {
		return false
	}
	s := argsScan{in: argsJSON, target: target}
	s.space()
	if s.i == len(s.in) || (s.in[s.i] != '{' && s.in[s.i] != '[') {
		// A value that is neither an object nor an array: how a decoder
		// reads what follows it is its own, so it reads it.
		return namesTargetDecoded(argsJSON, target)
	}
	return s.value(0) && s.found
}

// namesTargetDecoded is NamesTarget by decoding argsJSON: the answer for
// args whose first value is a string, number or literal.
func namesTargetDecoded(argsJSON, target string) bool {
	d := json.NewDecoder(strings.NewReader(argsJSON))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return false
	}
	switch v := v.(type) {
	case string:
		return v == target
	case json.Number:
		return v.String() == target
	}
	return false
}

// argsScan reads one JSON value from in at i, checking its syntax as
// encoding/json does, and sets found when a string or number value in it
// is target.
type argsScan struct {
	in     string
	i      int
	target string
	found  bool
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
// it) and reports whether its syntax is valid.
func (s *argsScan) value(depth int) bool {
	s.space()
	if s.i == len(s.in) {
		return false
	}
	switch c := s.in[s.i]; {
	case c == '{':
		if depth+1 > maxNesting {
			return false
		}
		s.i++
		s.space()
		if s.i < len(s.in) && s.in[s.i] == '}' {
			s.i++
			return true
		}
		for {
			s.space()
			if _, ok := s.str(); !ok {
				return false
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
				return true
			default:
				return false
			}
		}
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
		start := s.i
		if !s.number() {
			return false
		}
		if s.in[start:s.i] == s.target {
			s.found = true
		}
		return true
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
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
	for s.i < len(s.in) {
		c := s.in[s.i]
		switch {
		case c == '"':
			s.i++
			return s.in[start:s.i], true
		case c < 0x20:
			return "", false
		case c == '\\':
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
// target once unescaped, as encoding/json reads it. An escape stands for
// fewer bytes than it takes, a sixth of them at least (\u0041 is "A"),
// so a valid UTF-8 string outside those bounds is not unescaped at all:
// a writer's args full of escapes cost a scan, not a decoding each.
func (s *argsScan) isTarget(q string) bool {
	body := q[1 : len(q)-1]
	valid := utf8.ValidString(body)
	if !strings.Contains(body, `\`) && valid {
		return body == s.target
	}
	if valid && (len(body) < len(s.target) || len(body) > 6*len(s.target)) {
		return false
	}
	var v string
	if json.Unmarshal([]byte(q), &v) != nil {
		return false
	}
	return v == s.target
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
