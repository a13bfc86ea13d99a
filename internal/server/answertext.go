package server

import (
	"strings"
	"unicode/utf8"
)

// answerText is s as an answer carries it: a protobuf string, which must
// be UTF-8, or the answer cannot be sent at all (REST 500, gRPC INTERNAL).
// Check details and the messages built from them quote what a writer sent,
// and a row stored by an earlier version may hold bytes that are not UTF-8:
// each run of such bytes reads as U+FFFD.
func answerText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
