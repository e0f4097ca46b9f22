package formats

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Name is a string of any bytes, as a Linux file system gives names
// (class folders, sample keys), that JSON keeps exactly. encoding/json
// turns every byte that is not valid UTF-8 into U+FFFD, so two class
// folders b"caf\xe9" and b"caf\xe8" would both read back as "caf\ufffd".
// Name writes each such byte b as the escape \udcXX (U+DC00+b), as
// Python's surrogateescape does: Python's json.loads then gives exactly
// the str os.scandir (and so torchvision's ImageFolder) gives for that
// name, and os.fsencode gives the bytes back. Valid UTF-8 is written
// byte for byte as encoding/json writes it, so manifests of ordinary
// names do not change. UnmarshalJSON takes \udcXX back to the byte.
type Name string

// MarshalJSON writes n as a JSON string (see Name).
func (n Name) MarshalJSON() ([]byte, error) { return AppendJSONName(nil, string(n)), nil }

// UnmarshalJSON reads a JSON string, \udc80-\udcff escapes as raw bytes.
func (n *Name) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	s, err := UnquoteJSONName(data)
	if err != nil {
		return err
	}
	*n = Name(s)
	return nil
}

// Names is a list of Names; a []string converts to it without a copy.
type Names []string

// MarshalJSON writes ns as a JSON array of strings (see Name).
func (ns Names) MarshalJSON() ([]byte, error) {
	if ns == nil {
		return []byte("null"), nil
	}
	b := []byte{'['}
	for i, s := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONName(b, s)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a JSON array of strings (see Name).
func (ns *Names) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*ns = nil
		return nil
	}
	out := make(Names, len(raw))
	for i, r := range raw {
		s, err := UnquoteJSONName(r)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		out[i] = s
	}
	*ns = out
	return nil
}

const hexDigits = "0123456789abcdef"

// AppendJSONName appends s to dst as a quoted JSON string: valid UTF-8
// exactly as encoding/json writes it with HTML escaping off (an encoder
// that escapes HTML does so again on a Marshaler's output), and each byte
// that is not valid UTF-8 as \udcXX.
func AppendJSONName(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\':
				dst = append(dst, c)
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, '\\', 'u', 'd', 'c', hexDigits[c>>4], hexDigits[c&0xf])
		case r == '\u2028' || r == '\u2029': // as encoding/json: JSONP-safe
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// UnquoteJSONName decodes the JSON string literal data (quotes included)
// as AppendJSONName writes it: a lone \udc80-\udcff escape is that byte
// minus 0xdc00, a surrogate pair is its character, and raw bytes are
// kept as they are. Any other lone surrogate names no byte and no
// character and is refused.
func UnquoteJSONName(data []byte) (string, error) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return "", fmt.Errorf("not a JSON string: %.40q", data)
	}
	body := data[1 : len(data)-1]
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			if c < 0x20 || c == '"' {
				return "", fmt.Errorf("JSON string %.40q holds an unescaped %q", data, c)
			}
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(body) {
			return "", fmt.Errorf("JSON string %.40q ends inside an escape", data)
		}
		switch e := body[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(body[i+2:])
			if !ok {
				return "", fmt.Errorf("JSON string %.40q has a bad \\u escape", data)
			}
			i += 6
			switch {
			case r >= 0xd800 && r < 0xdc00: // high surrogate: needs its low half
				lo, ok := uint32(0), false
				if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
					lo, ok = hex4(body[i+2:])
				}
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return "", fmt.Errorf("JSON string %.40q holds a lone surrogate \\u%04x, which names no character or byte", data, r)
				}
				out = utf8.AppendRune(out, rune(0x10000+(r-0xd800)<<10+(lo-0xdc00)))
				i += 6
			case r >= 0xdc80 && r <= 0xdcff: // an escaped byte
				out = append(out, byte(r-0xdc00))
			case r >= 0xdc00 && r <= 0xdfff:
				return "", fmt.Errorf("JSON string %.40q holds a lone surrogate \\u%04x, which names no character or byte", data, r)
			default:
				out = utf8.AppendRune(out, rune(r))
			}
			continue
		default:
			return "", fmt.Errorf("JSON string %.40q has an unknown escape \\%c", data, e)
		}
		i += 2
	}
	return string(out), nil
}

// hex4 reads four hex digits.
func hex4(b []byte) (uint32, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r uint32
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | uint32(c)
	}
	return r, true
}
