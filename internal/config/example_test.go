package config_test

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
)

// documentedKeys returns the configuration keys docs/configuration.md
// documents in its tables: the first column of the table under "## Fields"
// (`store.dsn`, `apiKeys[].name`, `retention.periods.<class>`, and
// "`tls.certFile`, `.keyFile`" for two keys), and of the tables under a
// "### …" heading that names a block in backticks ("### The Merkle log
// (`merkleLog`)"), whose keys are within that block.
func documentedKeys(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("\\(`([A-Za-z.]+)`\\)\\s*$")
	var keys []string
	prefix, inTable := "", false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			prefix, inTable = "", false
			switch m := block.FindStringSubmatch(line); {
			case line == "## Fields":
				inTable = true
			case strings.HasPrefix(line, "### ") && m != nil:
				prefix, inTable = m[1]+".", true
			}
			continue
		}
		if !inTable || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		last := ""
		for item := range strings.SplitSeq(cell, ",") {
			key := strings.Trim(strings.TrimSpace(item), "`")
			if strings.HasPrefix(key, ".") { // `.keyFile` beside `tls.certFile`
				key = last[:strings.LastIndex(last, ".")] + key
			} else if !strings.HasPrefix(key, prefix) {
				key = prefix + key
			}
			keys, last = append(keys, key), key
		}
	}
	return keys
}

// commentedKey is a key shown commented out in the example, as
// "  # dsn: host=…" is: an alternative, or a setting without a default.
// A comment whose value reads as another key ("# or: jwksUri: …") is
// prose.
var (
	commentedKey = regexp.MustCompile(`^(\s*)# ([a-zA-Z][a-zA-Z0-9]*:)( .*)?$`)
	keyFirst     = regexp.MustCompile(`^ *[a-zA-Z][a-zA-Z0-9]*:( |$)`)
)

// exampleTree is the example configuration with its commented-out keys
// in place, as a tree of YAML nodes.
func exampleTree(t *testing.T) *yaml.Node {
	t.Helper()
	var b strings.Builder
	for line := range strings.Lines(string(config.Example)) {
		if m := commentedKey.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil && !keyFirst.MatchString(m[3]) {
			line = m[1] + m[2] + m[3] + "\n"
		}
		b.WriteString(line)
	}
	// Every key, commented out or not, is one ledgerd knows.
	dec := yaml.NewDecoder(strings.NewReader(b.String()))
	dec.KnownFields(true)
	var c config.Config
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("the example with its commented-out keys in place: %v\n%s", err, b.String())
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// lookup reports whether the tree n holds key: a dotted path whose
// "name[]" steps into a list's first item and whose "<placeholder>" is any
// entry of a mapping that has one.
func lookup(n *yaml.Node, key string) bool {
	for step := range strings.SplitSeq(key, ".") {
		if strings.HasPrefix(step, "<") {
			return n.Kind == yaml.MappingNode && len(n.Content) > 0
		}
		name, list := strings.CutSuffix(step, "[]")
		if n.Kind != yaml.MappingNode {
			return false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return false
		}
		if list {
			if next.Kind != yaml.SequenceNode || len(next.Content) == 0 {
				return false
			}
			next = next.Content[0]
		}
		n = next
	}
	return true
}

// TestExampleShowsEveryDocumentedKey: `ledgerd config example` shows every
// key docs/configuration.md documents, set or commented out.
func TestExampleShowsEveryDocumentedKey(t *testing.T) {
	keys := documentedKeys(t)
	// The parse found the tables: a key of the main one and of a block's.
	for _, k := range []string{"listen.grpc", "tls.keyFile", "merkleLog.keepPublished"} {
		if !strings.Contains(strings.Join(keys, " "), k) {
			t.Fatalf("no %s among the keys read from docs/configuration.md: %q", k, keys)
		}
	}
	tree := exampleTree(t)
	for _, k := range keys {
		if !lookup(tree, k) {
			t.Errorf("docs/configuration.md documents %s; ledgerd config example does not show it", k)
		}
	}
}
