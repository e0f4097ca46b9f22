package formats

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestNameJSONValidUTF8: a valid UTF-8 name is written byte for byte as
// encoding/json writes a string, with HTML escaping on (json.Marshal) and
// off (an Encoder, as manifest.Marshal uses), so manifests, KEY.json
// members and dataset IDs of ordinary names do not change.
func TestNameJSONValidUTF8(t *testing.T) {
	cases := []string{"", "cat", "a b/c.jpg", `q"uo\te`, "<&>", "café", "日本", "💀", "\u2028\u2029", "\x7f", "a\nb\r\t\b\f"}
	var all []byte
	for c := range 0x80 {
		all = append(all, byte(c))
	}
	cases = append(cases, string(all))
	for _, s := range cases {
		want, _ := json.Marshal(struct{ K []string }{[]string{s}})
		got, err := json.Marshal(struct{ K Names }{Names{s}})
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Names{%q}: got %s, %v; encoding/json writes %s", s, got, err, want)
		}
		for _, html := range []bool{false, true} {
			var a, b bytes.Buffer
			ea, eb := json.NewEncoder(&a), json.NewEncoder(&b)
			for _, e := range []*json.Encoder{ea, eb} {
				e.SetEscapeHTML(html)
				e.SetIndent("", "  ")
			}
			ea.Encode(map[string]any{"k": s})
			eb.Encode(map[string]any{"k": Name(s)})
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("Name(%q), escapeHTML %v: got %s, encoding/json writes %s", s, html, b.Bytes(), a.Bytes())
			}
		}
	}
}

// TestNameJSONBytes: bytes that are not valid UTF-8 are written as
// \udcXX, as Python's surrogateescape would, and read back exactly, so
// names that differ only there stay distinct.
func TestNameJSONBytes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"caf\xe9", `"caf\udce9"`},
		{"caf\xe8", `"caf\udce8"`},
		{"\xff\xfe/x.jpg", `"\udcff\udcfe/x.jpg"`},
		{"\xed\xb2\x80", `"\udced\udcb2\udc80"`}, // an encoded surrogate is not UTF-8
		{"\xe6\x97", `"\udce6\udc97"`},           // a cut-off character
		{"é\xe9\n", "\"é\\udce9\\n\""},
	} {
		got, _ := Name(tc.in).MarshalJSON()
		if string(got) != tc.want {
			t.Errorf("Name(%q) = %s, want %s", tc.in, got, tc.want)
		}
		var back Name
		if err := json.Unmarshal(got, &back); err != nil || string(back) != tc.in {
			t.Errorf("%s read back as %q, %v; want %q", got, back, err, tc.in)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		js, err := json.Marshal(Names{string(b)})
		if err != nil || !utf8.Valid(js) {
			t.Fatalf("Names{%q}: %s, %v (not valid UTF-8 JSON)", b, js, err)
		}
		var back Names
		if err := json.Unmarshal(js, &back); err != nil || len(back) != 1 || back[0] != string(b) {
			t.Fatalf("%q: %s read back as %q, %v", b, js, back, err)
		}
	}
}

// TestNameJSONRead: what Python's json.dumps writes for such names (ASCII
// escapes, surrogate pairs) reads back; lone surrogates that name no
// byte are refused, not guessed.
func TestNameJSONRead(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"caf\u00e9"`, "café"},
		{`"\ud83d\udc80"`, "💀"},
		{`"\udcff\/"`, "\xff/"},
		{"\"raw\xe9\"", "raw\xe9"},
	} {
		got, err := UnquoteJSONName([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`"\ud800"`, `"\udc10"`, `"\ud83d"`, `"\ud83dx"`, `"\uzzzz"`, `"\q"`, `"a`} {
		if got, err := UnquoteJSONName([]byte(bad)); err == nil {
			t.Errorf("%s read as %q; want an error", bad, got)
		}
	}
	var ns Names
	if err := json.Unmarshal([]byte("null"), &ns); err != nil || ns != nil {
		t.Errorf("null: %q, %v", ns, err)
	}
}
