package config

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yaml.v3's messages that name Go types (it keeps them as strings in
// yaml.TypeError), and the one Duration writes.
var (
	yamlLine     = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknown  = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	yamlSetTwice = regexp.MustCompile(`^field (.+) already set in type \S+$`)
	yamlType     = regexp.MustCompile("^cannot unmarshal (\\S+)(?: `(.*)`)? into (.+)$")
	yamlWant     = regexp.MustCompile(`^want (.+), not (".*")$`)
)

// loadError is the error of decoding the configuration file path, whose
// text is data: every message names the file and the line, and says what
// is wrong in the configuration's words (the YAML path of the setting,
// "unknown field", "want a whole number") rather than in Go types.
func loadError(path string, data []byte, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: no settings: the file is empty or only comments", path)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // it parsed once already; without it messages lack the paths
	ps := yamlPlaces(&root)
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		m := yamlLine.FindStringSubmatch(e)
		if m == nil {
			msgs[i] = path + ": " + e
			continue
		}
		line, _ := strconv.Atoi(m[1])
		msgs[i] = fmt.Sprintf("%s line %d: %s", path, line, yamlMessage(ps, line, m[2]))
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// yamlMessage rewrites one of yaml.v3's messages about line.
func yamlMessage(ps []yamlPlace, line int, msg string) string {
	if m := yamlUnknown.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown field %q%s", m[1], yamlIn(ps, line, m[1]))
	}
	if m := yamlSetTwice.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("field %q set twice%s", m[1], yamlIn(ps, line, m[1]))
	}
	if m := yamlType.FindStringSubmatch(msg); m != nil {
		tag, shown, want := m[1], m[2], goKind(m[3])
		got := fmt.Sprintf("%q", shown)
		match := func(n *yaml.Node) bool {
			return n.Kind == yaml.ScalarNode && (n.Value == shown ||
				len(shown) == 10 && strings.HasSuffix(shown, "...") && strings.HasPrefix(n.Value, shown[:7]))
		}
		switch tag {
		case "!!seq":
			got, match = "a list", func(n *yaml.Node) bool { return n.Kind == yaml.SequenceNode }
		case "!!map":
			got, match = "a mapping", func(n *yaml.Node) bool { return n.Kind == yaml.MappingNode }
		}
		if p, ok := yamlFind(ps, line, false, match); ok {
			return fmt.Sprintf("%s: want %s, not %s", p.path, want, describe(p.node))
		}
		return fmt.Sprintf("want %s, not %s", want, got)
	}
	if m := yamlWant.FindStringSubmatch(msg); m != nil {
		if p, ok := yamlFind(ps, line, false, func(n *yaml.Node) bool { return describe(n) == m[2] }); ok {
			return p.path + ": " + msg
		}
	}
	return msg
}

// yamlIn is " in PATH" for the mapping that holds the key at line, or
// " at the top level".
func yamlIn(ps []yamlPlace, line int, key string) string {
	p, ok := yamlFind(ps, line, true, func(n *yaml.Node) bool { return n.Value == key })
	switch {
	case !ok:
		return ""
	case p.path == "":
		return " at the top level"
	}
	return " in " + p.path
}

// goKind is what a value of the Go type t is, in a configuration's words.
func goKind(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "time.Duration", t == "config.Duration":
		return "a duration like 30s"
	}
	return "a mapping" // the configuration's blocks are structs
}

// describe is a node's value as a message shows it.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return strconv.Quote(n.Value)
}

// yamlPlace is a mapping key, with the path of its mapping, or a value,
// with its own path (listen.grpc, apiKeys[0].roles).
type yamlPlace struct {
	key  bool
	node *yaml.Node
	path string
}

// yamlPlaces lists every key and value under root.
func yamlPlaces(root *yaml.Node) []yamlPlace {
	var ps []yamlPlace
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				ps = append(ps, yamlPlace{key: true, node: k, path: path}, yamlPlace{node: v, path: p})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				ps = append(ps, yamlPlace{node: c, path: p})
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return ps
}

// yamlFind is the one key (or value) at line that match accepts.
func yamlFind(ps []yamlPlace, line int, key bool, match func(*yaml.Node) bool) (yamlPlace, bool) {
	var found yamlPlace
	n := 0
	for _, p := range ps {
		if p.key == key && p.node.Line == line && match(p.node) {
			found = p
			n++
		}
	}
	return found, n == 1
}
