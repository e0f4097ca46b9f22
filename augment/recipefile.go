package augment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// IsRecipeFile reports whether name has the extension of a recipe file
// that ParseFile reads: .yaml, .yml or .json.
func IsRecipeFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ParseFile parses the contents of a recipe file: YAML (.yaml, .yml) or
// JSON (.json), chosen by name's extension, holding a list of ops. Each
// element is either a one-line op ("hflip=0.5") or a map with one key,
// the op name, whose value is the one-line value (256, "224:random") or a
// map of named parameters; see the package doc. Errors name the file as
// name. The caller reads the file: this package does no I/O.
func ParseFile(name string, data []byte) (*Recipe, error) {
	var items []any
	if err := decodeFile(name, data, &items); err != nil {
		return nil, err
	}
	return fileOps(name, items, 0)
}

// decodeFile decodes a recipe file's YAML or JSON, chosen by name's
// extension, into v.
func decodeFile(name string, data []byte, v any) error {
	var err error
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".json":
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		err = dec.Decode(v)
	case ".yaml", ".yml":
		err = yaml.Unmarshal(data, v)
	default:
		return fmt.Errorf("recipe: %s: unknown extension %q (want .yaml, .yml or .json)", name, ext)
	}
	if err != nil {
		return fmt.Errorf("recipe: %s: want a list of ops: %w", name, err)
	}
	return nil
}

// fileOp turns one element of a recipe file's list into an op.
func fileOp(it any) (op, error) {
	switch v := it.(type) {
	case string:
		return parseOp(strings.TrimSpace(v))
	case map[string]any:
		if len(v) != 1 {
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, fmt.Errorf("recipe: want one op per list element, have %q", keys)
		}
		for name, val := range v {
			sp, ok := lookup(name)
			if !ok {
				return nil, unknownOp(name)
			}
			var s string
			if m, isMap := val.(map[string]any); isMap {
				var err error
				if s, err = sp.params(m); err != nil {
					return nil, fmt.Errorf("recipe: %s: %w (syntax: %s)", name, err, sp.syntax)
				}
			} else if s = scalar(val); s == "" {
				return nil, fmt.Errorf("recipe: %s needs a value (syntax: %s)", name, sp.syntax)
			}
			return sp.parse(s)
		}
	}
	return nil, fmt.Errorf("recipe: want an op such as \"hflip=0.5\" or {hflip: 0.5}, have %v (valid: %s)", it, validOps())
}

// ---- named parameters of recipe files ----

// scalar formats a YAML/JSON scalar or a two-element list as a one-line
// value: 256 -> "256", [0.1, 2] -> "0.1-2". It returns "" for anything else.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		return fmtNum(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		if len(v) == 2 {
			lo, hi := scalar(v[0]), scalar(v[1])
			if lo != "" && hi != "" {
				return lo + "-" + hi
			}
		}
	}
	return ""
}

// takeParams checks that p holds only the allowed keys and returns their
// one-line values ("" for absent keys).
func takeParams(p map[string]any, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range p {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return nil, fmt.Errorf("unknown parameter %q (want %s)", k, strings.Join(allowed, ", "))
		}
		s := scalar(v)
		if s == "" {
			return nil, fmt.Errorf("parameter %s: want a number, string or [lo, hi], have %v", k, v)
		}
		out[k] = s
	}
	return out, nil
}

// keyParams is the params function of ops with one named parameter.
func keyParams(key string) func(map[string]any) (string, error) {
	return func(p map[string]any) (string, error) {
		m, err := takeParams(p, key)
		if err != nil {
			return "", err
		}
		if m[key] == "" {
			return "", fmt.Errorf("missing parameter %s", key)
		}
		return m[key], nil
	}
}

var probParams = keyParams("p")

// sizeParams reads size, or width and height.
func sizeParams(m map[string]string) (string, error) {
	switch {
	case m["size"] != "" && m["width"] == "" && m["height"] == "":
		return m["size"], nil
	case m["size"] == "" && m["width"] != "" && m["height"] != "":
		return m["width"] + "x" + m["height"], nil
	}
	return "", errors.New("want size, or width and height")
}

func flagParam(m map[string]string, key string) (bool, error) {
	if m[key] == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(m[key])
	if err != nil {
		return false, fmt.Errorf("parameter %s: want true or false, have %q", key, m[key])
	}
	return b, nil
}

func resizeParams(p map[string]any) (string, error) {
	m, err := takeParams(p, "size", "width", "height", "fit")
	if err != nil {
		return "", err
	}
	s, err := sizeParams(m)
	if err != nil {
		return "", err
	}
	fit, err := flagParam(m, "fit")
	if fit {
		s += ":fit"
	}
	return s, err
}

func cropParams(p map[string]any) (string, error) {
	m, err := takeParams(p, "size", "width", "height", "random")
	if err != nil {
		return "", err
	}
	s, err := sizeParams(m)
	if err != nil {
		return "", err
	}
	random, err := flagParam(m, "random")
	if random {
		s += ":random"
	}
	return s, err
}

func rrcParams(p map[string]any) (string, error) {
	m, err := takeParams(p, "size", "width", "height", "scale", "ratio")
	if err != nil {
		return "", err
	}
	s, err := sizeParams(m)
	if err != nil {
		return "", err
	}
	for _, k := range []string{"scale", "ratio"} {
		if m[k] != "" {
			s += ":" + k + "=" + m[k]
		}
	}
	return s, nil
}

func jitterParams(p map[string]any) (string, error) {
	keys := []string{"brightness", "contrast", "saturation", "hue"}
	m, err := takeParams(p, keys...)
	if err != nil {
		return "", err
	}
	v := make([]string, len(keys))
	for i, k := range keys {
		if v[i] = m[k]; v[i] == "" {
			v[i] = "0"
		}
	}
	return strings.Join(v, "/"), nil
}

func shiftParams(p map[string]any) (string, error) {
	m, err := takeParams(p, "seconds", "roll")
	if err != nil {
		return "", err
	}
	if m["seconds"] == "" {
		return "", errors.New("missing parameter seconds")
	}
	roll, err := flagParam(m, "roll")
	s := m["seconds"]
	if roll {
		s += ":roll"
	}
	return s, err
}
