package server

import (
	"strconv"
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

// maxDetailBytes bounds a check's detail in an answer. A detail names what
// failed, and a receipt within the write limits can fail on enough actions
// or scopes to make it tens of KB: a page of such rows would not fit an
// answer. The row keeps the detail whole; the receipt and the logged
// actions it was computed from are in the row's evidence. A drill pull's
// detail, which quotes the same, is bounded alike.
const maxDetailBytes = 2048

// detailText is a check's detail as answers carry it: answerText, cut
// between characters at maxDetailBytes, saying how much was left out.
func detailText(s string) string {
	s, _ = cutText(s, maxDetailBytes)
	return s
}

// cutText is s as answers carry it (answerText), cut between characters
// at max bytes when longer, ending "… (N bytes more)"; cut says whether it
// was.
func cutText(s string, max int) (out string, cut bool) {
	s = answerText(s)
	if len(s) <= max {
		return s, false
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)-n) + " bytes more)", true
}
