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
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
				b.WriteByte(c)
			} else {
				b.WriteByte('_')
			}
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("sample key %q has no characters a tar member name can use", key)
	}
	return b.String(), nil
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
