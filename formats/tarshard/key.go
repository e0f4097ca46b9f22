package tarshard

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Stem maps a sample key to the member name stem that WebDataset groups a
// sample's members by. WebDataset cuts a member name at the first dot of
// its base name, so a stem holds no dots; it must also stay inside the
// archive when extracted. Every byte outside [A-Za-z0-9_-] in a path
// segment becomes '_' ("cat/001.jpg#c1" → "cat/001_jpg_c1", ".." → "__"),
// and empty segments are dropped, which removes leading, trailing and
// doubled slashes. The original key is kept in the sample's JSON member.
//
// A segment longer than MaxSegment bytes keeps its first MaxSegment-9
// mapped bytes, then '-' and the FNV-1a 32-bit hash of the segment's
// original bytes in hex: Linux (and so GNU tar and Python's tarfile)
// cannot create a file whose name is over 255 bytes, and the member's
// base name adds to the stem's last segment a collision suffix (9 bytes)
// and its own suffix (".json", "." + field name + ".npy": at most 46).
//
// Within one shard, a key whose stem an earlier, different key already
// holds gets the suffix '-' and the FNV-1a 32-bit hash of the key in hex
// ("a b.jpg" → "a_b_jpg", then "a_b.jpg" → "a_b_jpg-02800df8"); a key
// given twice is an error.
func Stem(key string) (string, error) {
	var b strings.Builder
	b.Grow(len(key))
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(safeName(seg, MaxSegment))
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("sample key %q has no characters a tar member name can use", key)
	}
	return b.String(), nil
}

// MaxSegment is the most bytes of one '/'-separated segment of a stem.
const MaxSegment = 200

// maxField is the most bytes of a field's name inside a member name
// (KEY.NAME.npy): with a stem's last segment (MaxSegment, plus 9 for a
// collision suffix), ".", NAME and ".npy" make at most 254 bytes.
const maxField = 40

// safeName maps every byte of s outside [A-Za-z0-9_-] to '_' and cuts a
// result longer than limit to limit-9 bytes, '-' and 8 hex digits of the
// FNV-1a 32-bit hash of s, so names that differ past the cut stay apart.
func safeName(s string, limit int) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > limit {
		h := fnv.New32a()
		h.Write([]byte(s))
		b = fmt.Appendf(b[:limit-9], "-%08x", h.Sum32())
	}
	return string(b)
}

// stems hands out distinct stems within one shard. When a key's stem is
// already taken by a different key ("a b.jpg" and "a_b.jpg" both give
// "a_b_jpg"), the later key gets a suffix derived from its own bytes:
// the stem, '-' and the FNV-1a 32-bit hash of the key in hex. The outcome
// depends only on the keys and their order in the shard, which the plan
// fixes, so shards stay reproducible.
type stems struct {
	owner map[string]string // stem → key
}

// pick returns the stem for key without claiming it.
func (s *stems) pick(key string) (string, error) {
	stem, err := Stem(key)
	if err != nil {
		return "", err
	}
	prev, taken := s.owner[stem]
	if !taken {
		return stem, nil
	}
	if prev == key {
		return "", fmt.Errorf("sample key %q appears twice in one shard; keys must be unique", key)
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	alt := fmt.Sprintf("%s-%08x", stem, h.Sum32())
	if other, taken := s.owner[alt]; taken {
		return "", fmt.Errorf("sample keys %q and %q map to the same tar member name %q; rename one of the inputs", key, other, alt)
	}
	return alt, nil
}

func (s *stems) claim(stem, key string) {
	if s.owner == nil {
		s.owner = make(map[string]string)
	}
	s.owner[stem] = key
}
