package brand

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxBrandFileBytes bounds a brand file and a record source file.
const maxBrandFileBytes = 4 << 20

// FieldError is a brand file that cannot be used: the file, the line and
// the field (a path such as intents[2].tool), and what is wrong.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	switch {
	case e.Line > 0 && e.Field != "":
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Load reads every *.yaml and *.yml in dir. A dir that is missing or not a
// directory is told so, rather than as one without brand files. Files are
// read inside dir only (os.Root): a symbolic link that leads out of it or
// is absolute, a brand file's or a record source's or a directory's on
// its path, is refused, naming the link; relative links that stay inside
// are followed.
func Load(dir string) (map[string]*Brand, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("brands directory %s: no such directory", dir)
	case err != nil:
		return nil, fmt.Errorf("brands directory %s: %w", dir, err)
	case !st.IsDir():
		return nil, fmt.Errorf("brands directory %s: not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("brands directory %s: %w", dir, err)
	}
	defer root.Close()
	return LoadFS(root.FS(), dir)
}

// LoadFS reads every *.yaml and *.yml at the top of fsys; shown is how messages name
// the directory. Whether a file may be read through a symbolic link is
// fsys's to say (Load: only inside the directory).
func LoadFS(fsys fs.FS, shown string) (map[string]*Brand, error) {
	// Both spellings of the extension: a brand.yml beside the others must
	// not be left out unseen.
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	yml, err := fs.Glob(fsys, "*.yml")
	if err != nil {
		return nil, err
	}
	names = append(names, yml...)
	slices.Sort(names)
	out := map[string]*Brand{}
	files := map[string]string{}
	for _, n := range names {
		b, err := Parse(fsys, n, filepath.Join(shown, n))
		if err != nil {
			return nil, err
		}
		if first, ok := files[b.ID]; ok {
			return nil, &FieldError{File: b.File, Line: 1, Field: "id", Msg: fmt.Sprintf("brand %s is defined twice (also in %s)", b.ID, first)}
		}
		out[b.ID], files[b.ID] = b, b.File
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no brand files (*.yaml or *.yml) in %s", shown)
	}
	return out, nil
}

// Parse reads and checks the brand file name in fsys (record sources are
// read beside it); shown names it in messages.
func Parse(fsys fs.FS, name, shown string) (*Brand, error) {
	data, err := readBounded(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("brand file %s: %w", shown, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(shown, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var b Brand
	if err := dec.Decode(&b); err != nil {
		return nil, yamlError(shown, err)
	}
	b.File = shown
	c := &checker{b: &b, at: locator{file: shown, root: &root}, fsys: fsys, dir: path.Dir(name)}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &b, nil
}

func readBounded(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		if link, to := linkOn(fsys, name); link != "" && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			if path.IsAbs(to) {
				return nil, fmt.Errorf("%s is a symbolic link to the absolute path %s: brand files and record sources are read "+
					"only inside the brands directory, through relative links that stay in it (copy the file in)", link, to)
			}
			return nil, fmt.Errorf("%s is a symbolic link to %s, which leads out of the brands directory: "+
				"brand files and record sources are read only inside it (copy the file in)", link, to)
		}
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBrandFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBrandFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxBrandFileBytes)
	}
	return data, nil
}

// linkOn returns the first symbolic link on the path name in fsys (name
// itself or a directory on the way) and its target, or "" for none.
func linkOn(fsys fs.FS, name string) (link, target string) {
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '/' {
			continue
		}
		if to, err := fs.ReadLink(fsys, name[:i]); err == nil {
			return name[:i], to
		}
	}
	return "", ""
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError names the file and line of a YAML error.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out []error
	for _, m := range msgs {
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			n, _ := strconv.Atoi(g[1])
			out = append(out, &FieldError{File: file, Line: n, Msg: g[2]})
			continue
		}
		out = append(out, &FieldError{File: file, Msg: strings.TrimPrefix(m, "yaml: ")})
	}
	return errors.Join(out...)
}

// locator finds the line of a field in a parsed file.
type locator struct {
	file string
	root *yaml.Node
}

// errf returns a FieldError at path: mapping keys (string) and sequence
// indexes (int) from the document's top.
func (l locator) errf(p []any, format string, a ...any) error {
	line := 0
	n := l.root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
		line = n.Line
	}
	for _, step := range p {
		if n == nil {
			break
		}
		var next *yaml.Node
		switch s := step.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == s {
						line, next = n.Content[i].Line, n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && s < len(n.Content) {
				next = n.Content[s]
				line = next.Line
			}
		}
		n = next
	}
	return &FieldError{File: l.file, Line: line, Field: fieldPath(p), Msg: fmt.Sprintf(format, a...)}
}

func fieldPath(p []any) string {
	var sb strings.Builder
	for _, step := range p {
		switch s := step.(type) {
		case string:
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(s)
		case int:
			fmt.Fprintf(&sb, "[%d]", s)
		}
	}
	return sb.String()
}

// at builds a path.
func at(p ...any) []any { return p }
