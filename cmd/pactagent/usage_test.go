package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Help after a command is the usage, not an error; an unknown command is
// named as such, before any flag is checked.
func TestHelpAndUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"send", "--help"}, {"authorize", "-h"}, {"init", "--dir", "x", "-help"}} {
		var out bytes.Buffer
		if err := run(args, &out); err != nil || !strings.Contains(out.String(), "pactagent send") {
			t.Errorf("%v: %v %q", args, err, out.String())
		}
	}
	for _, args := range [][]string{{"bogus"}, {"bogus", "--dir", "x"}} {
		err := run(args, &bytes.Buffer{})
		var u usageErr
		if !errors.As(err, &u) || err.Error() != "unknown command bogus" {
			t.Errorf("%v: %v", args, err)
		}
	}
}
