package tarshard

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/internal/testenv"
)

// pixels returns n deterministic pseudo-random bytes.
func pixels(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func imageSample(key string, label int64, shape ...int) formats.Sample {
	t := formats.Tensor{DType: formats.Uint8, Shape: shape}
	t.Data = pixels(uint64(len(key))*7919+uint64(label), t.Len())
	return formats.Sample{
		Key:    key,
		Source: "/data/" + key,
		Label:  label,
		Fields: []formats.Field{{Name: formats.DataField, Tensor: t}},
		Params: map[string]any{"crop": []any{1.0, 2.0}, "hflip": label%2 == 0, "scale": 0.75},
	}
}

func audio(key string, dtype formats.DType, frames, channels, rate int) formats.Sample {
	t := formats.Tensor{DType: dtype, Shape: []int{frames, channels}}
	for i := range frames * channels {
		v := 0.5 * math.Sin(float64(i)/7)
		if dtype == formats.Int16 {
			t.Data = binary.LittleEndian.AppendUint16(t.Data, uint16(int16(v*32767)))
		} else {
			t.Data = binary.LittleEndian.AppendUint32(t.Data, math.Float32bits(float32(v)))
		}
	}
	return formats.Sample{Key: key, Source: key, Label: 3, Rate: rate,
		Fields: []formats.Field{{Name: formats.DataField, Tensor: t}}}
}

// imageSamples covers RGB, both grey shapes, a clip, an image larger than
// one deflate stored block (64 KiB), an unlabelled sample, an extra field
// and a key too long for a USTAR name.
func imageSamples() []formats.Sample {
	withMask := imageSample("dog/002.png", 1, 20, 30, 3)
	mask := formats.Tensor{DType: formats.Float32, Shape: []int{2, 3}, Data: pixels(5, 24)}
	withMask.Fields = append(withMask.Fields, formats.Field{Name: "mask", Tensor: mask})
	unlabelled := imageSample("misc/x.jpg", formats.NoLabel, 9, 11, 3)
	unlabelled.Params = nil
	return []formats.Sample{
		imageSample("cat/001.jpg#c1", 0, 37, 53, 3),
		imageSample("cat/big.jpg", 0, 150, 200, 3),
		imageSample("grey/a.png", 2, 17, 19),
		imageSample("grey/b.png", 2, 17, 19, 1),
		imageSample("video/clip.mp4#f0", 4, 3, 8, 12, 3),
		withMask,
		unlabelled,
		imageSample(strings.Repeat("long/", 25)+"name.jpg", 5, 4, 4, 3),
	}
}

func writeShard(t testing.TB, f formats.ShardFormat, dir string, samples []formats.Sample) (string, formats.ShardInfo) {
	t.Helper()
	p := filepath.Join(dir, "shard-000000"+f.Ext())
	w, err := f.Create(p, formats.ShardMeta{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		if err := w.Add(&samples[i]); err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return p, info
}

// frameData returns the pixel bytes of each PNG a sample becomes, with the
// PIL mode and size it must have.
type wantImage struct {
	Mode   string `json:"mode"`
	Size   [2]int `json:"size"`
	SHA256 string `json:"sha256"`
}

func wantImages(s formats.Sample) map[string]wantImage {
	t := s.Fields[0].Tensor
	stem, _ := Stem(s.Key)
	mode := func(c int) string {
		if c == 1 {
			return "L"
		}
		return "RGB"
	}
	out := map[string]wantImage{}
	switch len(t.Shape) {
	case 2:
		out[stem+".png"] = wantImage{"L", [2]int{t.Shape[1], t.Shape[0]}, sha(t.Data)}
	case 3:
		out[stem+".png"] = wantImage{mode(t.Shape[2]), [2]int{t.Shape[1], t.Shape[0]}, sha(t.Data)}
	case 4:
		n := t.Len() / t.Shape[0]
		for i := range t.Shape[0] {
			name := stem + "." + []string{"0000", "0001", "0002"}[i] + ".png"
			out[name] = wantImage{mode(t.Shape[3]), [2]int{t.Shape[2], t.Shape[1]}, sha(t.Data[i*n : (i+1)*n])}
		}
	}
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

const pyReader = `
import hashlib, io, json, sys, tarfile, wave
import numpy
from PIL import Image
out = []
with tarfile.open(sys.argv[1]) as tf:
    for m in tf.getmembers():
        data = tf.extractfile(m).read()
        r = {"name": m.name, "mode": m.mode, "mtime": m.mtime, "uid": m.uid, "gid": m.gid,
             "uname": m.uname, "gname": m.gname, "type": m.type.decode()}
        ext = m.name.rsplit("/", 1)[-1].split(".", 1)[1]
        if ext.endswith("png"):
            im = Image.open(io.BytesIO(data))
            im.load()
            r["image"] = {"mode": im.mode, "size": im.size, "sha256": hashlib.sha256(im.tobytes()).hexdigest()}
        elif ext == "wav":
            with wave.open(io.BytesIO(data)) as w:
                r["wav"] = [w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()]
        elif ext.endswith("npy"):
            a = numpy.load(io.BytesIO(data))
            r["npy"] = {"dtype": a.dtype.str, "shape": list(a.shape), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
        elif ext == "cls":
            r["cls"] = int(data)
        elif ext == "json":
            r["json"] = json.loads(data)
        out.append(r)
json.dump(out, sys.stdout)
`

type pyMember struct {
	Name  string     `json:"name"`
	Mode  int        `json:"mode"`
	Mtime float64    `json:"mtime"`
	UID   int        `json:"uid"`
	GID   int        `json:"gid"`
	Uname string     `json:"uname"`
	Gname string     `json:"gname"`
	Type  string     `json:"type"`
	Image *wantImage `json:"image"`
	WAV   []int      `json:"wav"`
	Npy   *struct {
		DType  string `json:"dtype"`
		Shape  []int  `json:"shape"`
		SHA256 string `json:"sha256"`
	} `json:"npy"`
	Cls  *int64         `json:"cls"`
	JSON map[string]any `json:"json"`
}

func readWithPython(t *testing.T, path string) []pyMember {
	t.Helper()
	py := testenv.NeedPython(t, "PIL", "numpy")
	out, err := exec.Command(py, "-c", pyReader, path).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("python tarfile/PIL: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var ms []pyMember
	if err := json.Unmarshal(out, &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestPNGShardPython opens every member with Python's tarfile, PIL and
// numpy and compares what they see with the samples written.
func TestPNGShardPython(t *testing.T) {
	samples := imageSamples()
	p, _ := writeShard(t, PNG(), t.TempDir(), samples)
	got := readWithPython(t, p)

	var wantNames []string
	images := map[string]wantImage{}
	for _, s := range samples {
		stem, _ := Stem(s.Key)
		for name, w := range wantImages(s) {
			images[name] = w
		}
		var frames []string
		for name := range wantImages(s) {
			frames = append(frames, name)
		}
		slices.Sort(frames)
		wantNames = append(wantNames, frames...)
		if len(s.Fields) > 1 {
			wantNames = append(wantNames, stem+".mask.npy")
		}
		if s.Label != formats.NoLabel {
			wantNames = append(wantNames, stem+".cls")
		}
		wantNames = append(wantNames, stem+".json")
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("members\n%q\nwant\n%q", names, wantNames)
	}

	byStem := map[string]formats.Sample{}
	for _, s := range samples {
		stem, _ := Stem(s.Key)
		byStem[stem] = s
	}
	for _, m := range got {
		if m.Mode != 0o644 || m.Mtime != 0 || m.UID != 0 || m.GID != 0 || m.Uname != "" || m.Gname != "" || m.Type != "0" {
			t.Errorf("%s: mode %o mtime %v uid %d gid %d uname %q gname %q type %q, want 644 0 0 0 \"\" \"\" \"0\"",
				m.Name, m.Mode, m.Mtime, m.UID, m.GID, m.Uname, m.Gname, m.Type)
		}
		stem, ext, _ := strings.Cut(m.Name, ".")
		s := byStem[stem]
		switch {
		case strings.HasSuffix(ext, "png"):
			if m.Image == nil || *m.Image != images[m.Name] {
				t.Errorf("%s: PIL sees %+v, want %+v", m.Name, m.Image, images[m.Name])
			}
		case ext == "mask.npy":
			f := s.Fields[1]
			if m.Npy == nil || m.Npy.DType != "<f4" || !slices.Equal(m.Npy.Shape, f.Shape) || m.Npy.SHA256 != sha(f.Data) {
				t.Errorf("%s: numpy sees %+v, want <f4 %v %s", m.Name, m.Npy, f.Shape, sha(f.Data))
			}
		case ext == "cls":
			if m.Cls == nil || *m.Cls != s.Label {
				t.Errorf("%s: label %v, want %d", m.Name, m.Cls, s.Label)
			}
		case ext == "json":
			params := s.Params
			if params == nil {
				params = map[string]any{}
			}
			want := map[string]any{"key": s.Key, "source": s.Source, "label": float64(s.Label), "params": params}
			if !reflect.DeepEqual(m.JSON, want) {
				t.Errorf("%s: %v, want %v", m.Name, m.JSON, want)
			}
		}
	}
}

// TestStoredDeflate parses every PNG of a shard in Go and checks that its
// zlib stream holds only stored (uncompressed) deflate blocks, that every
// row uses filter 0, and that the stored bytes are the tensor's bytes.
func TestStoredDeflate(t *testing.T) {
	samples := imageSamples()
	p, _ := writeShard(t, PNG(), t.TempDir(), samples)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pngs, blocks int
	err = Read(f, func(key string, members map[string][]byte) error {
		var s formats.Sample
		for _, c := range samples {
			if st, _ := Stem(c.Key); st == key {
				s = c
			}
		}
		want := wantImages(s)
		for ext, b := range members {
			if !strings.HasSuffix(ext, "png") {
				continue
			}
			pngs++
			raw, n, err := storedPixels(b)
			if err != nil {
				t.Errorf("%s.%s: %v", key, ext, err)
				continue
			}
			blocks += n
			w := want[key+"."+ext]
			rowBytes := len(raw) / w.Size[1]
			var pix []byte
			for y := range w.Size[1] {
				row := raw[y*rowBytes : (y+1)*rowBytes]
				if row[0] != 0 {
					t.Errorf("%s.%s row %d has filter %d, want 0", key, ext, y, row[0])
				}
				pix = append(pix, row[1:]...)
			}
			if sha(pix) != w.SHA256 {
				t.Errorf("%s.%s: stored pixels differ from the tensor", key, ext)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pngs != 10 {
		t.Errorf("found %d PNG members, want 10", pngs)
	}
	// The 200×150 RGB image alone needs two 64 KiB stored blocks.
	if blocks <= pngs {
		t.Errorf("%d deflate blocks in %d PNGs; expected some to span several", blocks, pngs)
	}
}

// storedPixels walks a PNG's chunks, joins its IDAT data and decodes the
// zlib stream, failing on any deflate block that is not stored (BTYPE 00).
// It returns the filtered scanlines and the number of deflate blocks.
func storedPixels(b []byte) ([]byte, int, error) {
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, 0, fmt.Errorf("no PNG signature")
	}
	var z []byte
	for rest := b[8:]; len(rest) > 0; {
		if len(rest) < 12 {
			return nil, 0, fmt.Errorf("truncated chunk")
		}
		n := int(binary.BigEndian.Uint32(rest))
		typ := string(rest[4:8])
		if typ == "IDAT" {
			z = append(z, rest[8:8+n]...)
		}
		rest = rest[12+n:]
	}
	if len(z) < 6 || z[0]&0x0f != 8 || (uint16(z[0])<<8|uint16(z[1]))%31 != 0 {
		return nil, 0, fmt.Errorf("bad zlib header % x", z[:2])
	}
	var out []byte
	blocks := 0
	pos := 2
	for {
		if pos+5 > len(z) {
			return nil, 0, fmt.Errorf("truncated deflate stream")
		}
		hdr := z[pos]
		if btype := hdr >> 1 & 3; btype != 0 {
			return nil, 0, fmt.Errorf("deflate block %d has BTYPE %d, want 0 (stored)", blocks, btype)
		}
		if hdr>>3 != 0 {
			return nil, 0, fmt.Errorf("stored block header has stray bits %08b", hdr)
		}
		// A stored block's header bits are padded to the byte boundary.
		n := int(binary.LittleEndian.Uint16(z[pos+1:]))
		if nn := binary.LittleEndian.Uint16(z[pos+3:]); nn != ^uint16(n) {
			return nil, 0, fmt.Errorf("stored block LEN %d NLEN %d", n, nn)
		}
		out = append(out, z[pos+5:pos+5+n]...)
		pos += 5 + n
		blocks++
		if hdr&1 == 1 {
			break
		}
	}
	if len(z)-pos != 4 {
		return nil, 0, fmt.Errorf("%d bytes after the final block, want the 4-byte Adler-32", len(z)-pos)
	}
	return out, blocks, nil
}

func TestFieldName(t *testing.T) {
	for name, want := range map[string]string{
		"mask": "mask", "npz/labels": "labels", "npz/x%5Foffsets": "x_5Foffsets", "a.b": "a_b", "": "_", "npz/": "npz_",
	} {
		if got := fieldName(name); got != want {
			t.Errorf("fieldName(%q) = %q, want %q", name, got, want)
		}
	}
}
