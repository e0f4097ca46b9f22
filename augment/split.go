package augment

import (
	"fmt"
	"strings"
)

// Separator splits a recipe into the ops convert runs once (before it)
// and the ops the reader runs afresh every epoch (after it).
const Separator = "|"

// onlineOps are the ops a reader may run every epoch: each costs a
// strided copy of the stored sample (crop, flips), or runs on a torch
// batch (rrc). Decoding, resampling and colour work are what convert is
// for.
var onlineOps = map[string]bool{"crop": true, "hflip": true, "vflip": true, "rrc": true}

// ParseSplit parses a one-line recipe that may hold one Separator:
// "resize=256,crop=256 | crop=224:random,hflip=0.5". online is the
// identity when there is none; its ops must be ones a reader runs cheaply
// (CheckOnline).
func ParseSplit(s string) (offline, online *Recipe, err error) {
	off, on, split := strings.Cut(s, Separator)
	if strings.Contains(on, Separator) {
		return nil, nil, fmt.Errorf("recipe %q: more than one %q: a recipe has one offline part and one online part", s, Separator)
	}
	if offline, err = Parse(off); err != nil {
		return nil, nil, err
	}
	if online, err = Parse(on); err != nil {
		return nil, nil, fmt.Errorf("online part (after %q): %w", Separator, err)
	}
	if split && len(online.ops) == 0 {
		return nil, nil, fmt.Errorf("recipe %q: nothing after %q: give the ops the reader runs each epoch, or drop the %q", s, Separator, Separator)
	}
	return offline, online, online.CheckOnline()
}

// CheckOnline refuses an op a reader should not run every epoch, naming
// the reason.
func (r *Recipe) CheckOnline() error {
	for _, o := range r.ops {
		name := opName(o)
		if onlineOps[name] {
			continue
		}
		return fmt.Errorf("recipe: %s after %q: the reader runs the online part for every sample of every epoch, so it takes only crop, hflip, vflip and rrc (a strided copy, or a batch op on the GPU); %s resamples or recolours every pixel: move it before %q, where convert runs it once",
			o.String(), Separator, name, Separator)
	}
	return nil
}

// ParseFileSplit parses a recipe file as ParseFile does, also in the
// split form: a list whose one element "|" separates the offline ops from
// the online ones, or a map {offline: [...], online: [...]}.
func ParseFileSplit(name string, data []byte) (offline, online *Recipe, err error) {
	var doc any
	if err := decodeFile(name, data, &doc); err != nil {
		return nil, nil, err
	}
	var off, on []any
	switch v := doc.(type) {
	case map[string]any:
		for k, part := range v {
			list, ok := part.([]any)
			switch {
			case !ok && part != nil:
				return nil, nil, fmt.Errorf("recipe: %s: %s: want a list of ops", name, k)
			case k == "offline":
				off = list
			case k == "online":
				on = list
			default:
				return nil, nil, fmt.Errorf("recipe: %s: key %q: want offline and online (lists of ops), or a plain list", name, k)
			}
		}
	case []any:
		off = v
		for i, it := range v {
			if s, ok := it.(string); ok && strings.TrimSpace(s) == Separator {
				off, on = v[:i], v[i+1:]
				break
			}
		}
	default:
		return nil, nil, fmt.Errorf("recipe: %s: want a list of ops, or {offline: [...], online: [...]}", name)
	}
	if offline, err = fileOps(name, off, 0); err != nil {
		return nil, nil, err
	}
	if online, err = fileOps(name, on, len(off)+1); err != nil {
		return nil, nil, err
	}
	if err := online.CheckOnline(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return offline, online, nil
}

// fileOps parses the ops of a recipe file's list; first numbers them in
// messages.
func fileOps(name string, items []any, first int) (*Recipe, error) {
	r := &Recipe{}
	for i, it := range items {
		if s, ok := it.(string); ok && strings.TrimSpace(s) == Separator {
			return nil, fmt.Errorf("%s: op %d: a second %q: a recipe has one offline part and one online part", name, first+i+1, Separator)
		}
		o, err := fileOp(it)
		if err != nil {
			return nil, fmt.Errorf("%s: op %d: %w", name, first+i+1, err)
		}
		r.ops = append(r.ops, o)
	}
	return r, nil
}
