package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
)

func TestConfigExample(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"config", "example"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), config.Example) {
		t.Fatal("config example printed something else")
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{{"config"}, {"--no-such-flag"}, {"serve"}, {"--config", "/does/not/exist.yaml"}, {"--log-level", "loud", "--data-dir", t.TempDir()}} {
		var out bytes.Buffer
		if err := run(args, &out, &out); err == nil {
			t.Errorf("run(%q) succeeded", strings.Join(args, " "))
		}
	}
}
