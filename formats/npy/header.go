package npy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prep-dev/prep/formats"
)

// header is the parsed dictionary of a .npy header.
type header struct {
	dtype   formats.DType
	swap    bool // elements are big-endian
	fortran bool
	shape   []int
}

// errStructured is returned as soon as the descr turns out to be a list:
// structured dtypes are refused, so their field list is never parsed.
var errStructured = errors.New("structured dtypes (record arrays) are not supported: save each field as its own array, e.g. with np.savez")

// parseHeader parses the Python dict literal numpy writes, e.g.
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//
// It accepts exactly the literal forms numpy produces (quoted strings,
// True/False, non-negative integers, tuples of them) in any key order and
// never evaluates anything.
func parseHeader(text string) (*header, error) {
	p := &literal{s: text}
	p.space()
	if !p.eat('{') {
		return nil, p.errorf("header must start with '{'")
	}
	var h header
	seen := map[string]bool{}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, p.errorf("duplicate key %q", key)
		}
		seen[key] = true
		p.space()
		if !p.eat(':') {
			return nil, p.errorf("want ':' after key %q", key)
		}
		p.space()
		switch key {
		case "descr":
			if p.peek() == '[' {
				return nil, errStructured
			}
			descr, err := p.str()
			if err != nil {
				return nil, fmt.Errorf("descr: %w", err)
			}
			h.dtype, h.swap, err = parseDescr(descr)
			if err != nil {
				return nil, err
			}
		case "fortran_order":
			if h.fortran, err = p.boolean(); err != nil {
				return nil, fmt.Errorf("fortran_order: %w", err)
			}
		case "shape":
			if h.shape, err = p.tuple(); err != nil {
				return nil, fmt.Errorf("shape: %w", err)
			}
		default:
			return nil, p.errorf("unexpected key %q (want descr, fortran_order, shape)", key)
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return nil, p.errorf("want ',' or '}'")
		}
		break
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return nil, fmt.Errorf("header has no %q", k)
		}
	}
	// numpy pads the header with spaces and ends it with a newline.
	if rest := strings.Trim(p.s[p.i:], " \t\n"); rest != "" {
		return nil, p.errorf("unexpected text after the dictionary")
	}
	return &h, nil
}

// literal scans the Python literals of a .npy header.
type literal struct {
	s string
	i int
}

func (p *literal) errorf(format string, args ...any) error {
	return fmt.Errorf("bad header at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *literal) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *literal) eat(c byte) bool {
	if p.peek() == c && p.i < len(p.s) {
		p.i++
		return true
	}
	return false
}

func (p *literal) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// str scans a quoted string as repr writes it: single or double quotes,
// with only the escapes \\, \' and \" allowed.
func (p *literal) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", p.errorf("want a quoted string")
	}
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch c {
		case q:
			return b.String(), nil
		case '\n':
			return "", p.errorf("newline inside a string")
		case '\\':
			if p.i >= len(p.s) {
				return "", p.errorf("unterminated string")
			}
			e := p.s[p.i]
			if e != '\\' && e != '\'' && e != '"' {
				return "", p.errorf("unsupported escape \\%c", e)
			}
			b.WriteByte(e)
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *literal) boolean() (bool, error) {
	switch {
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	}
	return false, p.errorf("want True or False")
}

// integer scans a non-negative decimal integer; a trailing L (Python 2
// longs, in files from old numpy) is accepted.
func (p *literal) integer() (int, error) {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == start {
		return 0, p.errorf("want a non-negative integer")
	}
	n, err := strconv.Atoi(p.s[start:p.i])
	if err != nil {
		return 0, p.errorf("dimension %s is too large", p.s[start:p.i])
	}
	p.eat('L')
	return n, nil
}

// tuple scans a tuple of integers: (), (3,), (3, 4) or (3, 4,).
// A parenthesised integer such as (3) is not a tuple and is refused.
func (p *literal) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, p.errorf("want a tuple")
	}
	dims := []int{}
	for {
		p.space()
		if p.eat(')') {
			return dims, nil
		}
		n, err := p.integer()
		if err != nil {
			return nil, err
		}
		dims = append(dims, n)
		p.space()
		if p.eat(',') {
			continue
		}
		if !p.eat(')') {
			return nil, p.errorf("want ',' or ')' in the shape tuple")
		}
		if len(dims) == 1 {
			return nil, p.errorf("(%d) is not a tuple; a 1-d shape is written (%d,)", n, n)
		}
		return dims, nil
	}
}

// parseDescr maps a numpy type string such as "<f4" to a DType and
// whether its bytes must be swapped. '=' (native) and '|' (not
// applicable) are read as little-endian, the byte order of every machine
// prep runs on.
func parseDescr(s string) (formats.DType, bool, error) {
	if s == "" {
		return "", false, errors.New("empty descr")
	}
	order := byte('=')
	body := s
	switch s[0] {
	case '<', '>', '|', '=':
		order, body = s[0], s[1:]
	}
	if body == "" {
		return "", false, fmt.Errorf("descr %q has no type", s)
	}
	kind, size := body[0], body[1:]
	var dt formats.DType
	switch kind {
	case 'O':
		return "", false, errors.New("object arrays are not supported: prep never unpickles")
	case 'U', 'S', 'a':
		return "", false, fmt.Errorf("string arrays (descr %q) are not supported: only numeric dtypes are", s)
	case 'V':
		return "", false, fmt.Errorf("void/raw arrays (descr %q) are not supported: only numeric dtypes are", s)
	case 'M', 'm':
		return "", false, fmt.Errorf("datetime arrays (descr %q) are not supported: convert them to int64 first (a.astype(np.int64))", s)
	case '?':
		if size == "" {
			dt = formats.Bool
		}
	case 'b':
		if size == "1" {
			dt = formats.Bool
		}
	case 'i':
		dt = map[string]formats.DType{"1": formats.Int8, "2": formats.Int16, "4": formats.Int32, "8": formats.Int64}[size]
	case 'u':
		dt = map[string]formats.DType{"1": formats.Uint8, "2": formats.Uint16, "4": formats.Uint32, "8": formats.Uint64}[size]
	case 'f':
		dt = map[string]formats.DType{"2": formats.Float16, "4": formats.Float32, "8": formats.Float64}[size]
		if dt == "" && (size == "12" || size == "16") {
			return "", false, fmt.Errorf("extended-precision float (descr %q) is not supported: convert to float64 first", s)
		}
	case 'c':
		dt = map[string]formats.DType{"8": formats.Complex64, "16": formats.Complex128}[size]
		if dt == "" && (size == "24" || size == "32") {
			return "", false, fmt.Errorf("extended-precision complex (descr %q) is not supported: convert to complex128 first", s)
		}
	}
	if dt == "" {
		return "", false, fmt.Errorf("unsupported dtype descr %q", s)
	}
	return dt, order == '>' && dt.Size() > 1, nil
}
