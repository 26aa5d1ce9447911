package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// configFlag names the flag that gives a configuration file; it cannot be
// a key of the file itself.
const configFlag = "config"

// isListFlag reports whether a flag's value is a comma-separated list,
// which a configuration file may also give as a YAML list.
func isListFlag(name string) bool { return name == "etcd-servers" || name == "authorization-mode" }

// applyConfigFile sets the flags of fs from the YAML file at path, as k3s
// does with its config.yaml: each key is a flag's name without the dashes,
// each value what the flag would be given (a scalar, or a list for the
// flags of isListFlag). Flags already set on the command line keep their
// value: the command line overrides the file. Every unknown key, value of
// the wrong shape or value the flag refuses is an error naming the key
// and its line; all of them are reported at once.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("configuration file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("configuration file %s: %w", path, err)
	}
	if doc.Kind == 0 { // empty, or only comments
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("configuration file %s: want keys and values (flag: value), found a %s", path, kindName(root))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	var errs []error
	bad := func(n *yaml.Node, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", path, n.Line, fmt.Sprintf(format, args...)))
	}
	seen := map[string]int{} // key: line
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, value := root.Content[i], root.Content[i+1]
		name := key.Value
		if line, ok := seen[name]; ok {
			bad(key, "%q already given on line %d", name, line)
			continue
		}
		seen[name] = key.Line
		f := fs.Lookup(name)
		if key.Kind != yaml.ScalarNode || f == nil || name == configFlag {
			hint := ""
			if f := fs.Lookup(strings.TrimLeft(name, "-")); f != nil && name != f.Name {
				hint = fmt.Sprintf(" (write %s, without the dashes)", f.Name)
			}
			bad(key, "unknown key %q%s; the keys are the flags of leasehold serve -h, without their dashes", name, hint)
			continue
		}
		var s string
		switch value.Kind {
		case yaml.ScalarNode:
			if value.Tag == "!!null" {
				bad(value, "%s: no value", name)
				continue
			}
			s = value.Value
		case yaml.SequenceNode:
			if !isListFlag(name) {
				bad(value, "%s takes one value, not a list", name)
				continue
			}
			var items []string
			for _, item := range value.Content {
				if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
					bad(item, "%s: each item must be a single value", name)
					continue
				}
				items = append(items, item.Value)
			}
			s = strings.Join(items, ",")
		default:
			bad(value, "%s: want a value, found a %s", name, kindName(value))
			continue
		}
		if onCommandLine[name] {
			continue
		}
		if err := fs.Set(name, s); err != nil {
			bad(value, "%s: invalid value %q: %v", name, s, err)
		}
	}
	return errors.Join(errs...)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "single value"
}
