package tarshard

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
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

// readAll reads a shard back into samples through Read and Decode.
func readAll(t *testing.T, p string) []formats.Sample {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []formats.Sample
	err = Read(f, func(key string, members map[string][]byte) error {
		s, err := Decode(key, members)
		out = append(out, s)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// normalize gives a written sample the form Decode returns: (H,W) grey
// as (H,W,1), mono (T,) as (T,1), params through JSON.
func normalize(t *testing.T, s formats.Sample) formats.Sample {
	s.Fields = slices.Clone(s.Fields)
	p := &s.Fields[0]
	if len(p.Shape) == 2 && s.Rate == 0 {
		p.Shape = []int{p.Shape[0], p.Shape[1], 1}
	}
	if len(p.Shape) == 1 {
		p.Shape = []int{p.Shape[0], 1}
	}
	p.Name = formats.DataField
	b, err := json.Marshal(s.Params)
	if err != nil {
		t.Fatal(err)
	}
	s.Params = nil
	if err := json.Unmarshal(b, &s.Params); err != nil {
		t.Fatal(err)
	}
	if s.Params == nil {
		s.Params = map[string]any{}
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		format  formats.ShardFormat
		samples []formats.Sample
	}{
		{PNG(), imageSamples()},
		{WAV(), []formats.Sample{
			audio("speech/a.flac", formats.Int16, 1600, 1, 16000),
			audio("speech/b.flac", formats.Float32, 4800, 2, 48000),
		}},
	} {
		t.Run(tc.format.Name(), func(t *testing.T) {
			p, info := writeShard(t, tc.format, t.TempDir(), tc.samples)
			got := readAll(t, p)
			if info.Count != len(tc.samples) || len(got) != len(tc.samples) {
				t.Fatalf("wrote %d samples, info says %d, read %d", len(tc.samples), info.Count, len(got))
			}
			for i := range got {
				want := normalize(t, tc.samples[i])
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("sample %d: read back\n%+v\nwant\n%+v", i, summary(got[i]), summary(want))
				}
			}
		})
	}
}

func summary(s formats.Sample) string {
	var b strings.Builder
	b.WriteString(s.Key + " " + s.Source)
	for _, f := range s.Fields {
		b.WriteString(" " + f.Name + ":" + string(f.DType) + strings.ReplaceAll(strings.Trim(jsonString(f.Shape), "[]"), ",", "x") + ":" + sha(f.Data)[:8])
	}
	return b.String() + " params " + jsonString(s.Params) + " label " + jsonString(s.Label) + " rate " + jsonString(s.Rate)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWAVShardPython reads a WAV shard's PCM members with Python's
// tarfile and wave modules.
func TestWAVShardPython(t *testing.T) {
	samples := []formats.Sample{
		audio("a/1.wav", formats.Int16, 800, 2, 8000),
		audio("a/2.wav", formats.Int16, 441, 1, 44100),
	}
	p, _ := writeShard(t, WAV(), t.TempDir(), samples)
	var got [][]int
	for _, m := range readWithPython(t, p) {
		if m.WAV != nil {
			got = append(got, m.WAV)
		}
	}
	want := [][]int{{8000, 2, 2, 800}, {44100, 1, 2, 441}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("python wave sees %v, want %v (rate channels width frames)", got, want)
	}
}

// TestReproducible writes the same samples twice and compares the files,
// and checks ShardInfo against the file on disk.
func TestReproducible(t *testing.T) {
	for _, f := range []formats.ShardFormat{PNG(), WAV()} {
		samples := imageSamples()
		if f.Name() == "wav" {
			samples = []formats.Sample{audio("x", formats.Float32, 100, 2, 8000), audio("y", formats.Int16, 50, 1, 8000)}
		}
		p1, info1 := writeShard(t, f, t.TempDir(), samples)
		p2, info2 := writeShard(t, f, t.TempDir(), samples)
		b1, _ := os.ReadFile(p1)
		b2, _ := os.ReadFile(p2)
		if !bytes.Equal(b1, b2) {
			t.Errorf("%s: two writes of the same samples differ", f.Name())
		}
		sum := sha256.Sum256(b1)
		want := formats.ShardInfo{File: "shard-000000.tar", Count: len(samples), Bytes: int64(len(b1)), SHA256: hex.EncodeToString(sum[:]),
			CRC32C: fmt.Sprintf("%08x", crc32.Checksum(b1, crc32.MakeTable(crc32.Castagnoli)))}
		if !reflect.DeepEqual(info1, want) || !reflect.DeepEqual(info2, want) {
			t.Errorf("%s: ShardInfo %+v and %+v, want %+v", f.Name(), info1, info2, want)
		}
	}
}

func TestStem(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"cat/001.jpg#c1", "cat/001_jpg_c1"},
		{"../../etc/passwd", "__/__/etc/passwd"},
		{"/abs/path.png", "abs/path_png"},
		{"a/b.c.d.jpg", "a/b_c_d_jpg"},
		{"a//b/./c", "a/b/_/c"},
		{"dir.d/file", "dir_d/file"},
		{"plain", "plain"},
		{"ünï cödé/x y.wav", "__n___c__d__/x_y_wav"},
		{"a\\b:c", "a_b_c"},
		{"video/clip.mp4#f12#c0", "video/clip_mp4_f12_c0"},
	} {
		got, err := Stem(tc.key)
		if err != nil || got != tc.want {
			t.Errorf("Stem(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for _, key := range []string{"", "/", "//"} {
		if got, err := Stem(key); err == nil {
			t.Errorf("Stem(%q) = %q, want an error", key, got)
		}
	}
}

// TestStemCollisions writes keys that sanitize to the same stem into one
// shard: the later ones get a hash suffix, the JSON keeps each original
// key, and a repeated key is an error.
func TestStemCollisions(t *testing.T) {
	keys := []string{"a b.jpg", "a_b.jpg", "a.b.jpg", "c.jpg"}
	var samples []formats.Sample
	for i, k := range keys {
		samples = append(samples, imageSample(k, int64(i), 2, 2, 3))
	}
	p, _ := writeShard(t, PNG(), t.TempDir(), samples)
	got := readAll(t, p)
	f, _ := os.Open(p)
	defer f.Close()
	var stems []string
	Read(f, func(key string, _ map[string][]byte) error {
		stems = append(stems, key)
		return nil
	})
	want := []string{"a_b_jpg", "a_b_jpg-" + fnvHex("a_b.jpg"), "a_b_jpg-" + fnvHex("a.b.jpg"), "c_jpg"}
	if !slices.Equal(stems, want) {
		t.Errorf("stems %q, want %q", stems, want)
	}
	for i, s := range got {
		if s.Key != keys[i] {
			t.Errorf("sample %d has key %q in its JSON, want %q", i, s.Key, keys[i])
		}
	}

	w, err := PNG().Create(filepath.Join(t.TempDir(), "dup.tar"), formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	s := imageSample("same.jpg", 0, 2, 2, 3)
	if err := w.Add(&s); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(&s); err == nil || !strings.Contains(err.Error(), "same.jpg") {
		t.Errorf("adding a key twice: %v, want an error naming it", err)
	}
}

// fnvHex is the FNV-1a 32-bit hash of key in hex, the documented suffix.
func fnvHex(key string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("%08x", h.Sum32())
}

// TestCloseAndAbort checks the temporary name while writing, the rename
// on Close and that Abort leaves nothing behind.
func TestCloseAndAbort(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.tar")
	s := imageSample("k", 0, 4, 4, 3)

	w, err := PNG().Create(p, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(&s); err != nil {
		t.Fatal(err)
	}
	if got := ls(t, dir); !slices.Equal(got, []string{"s.tar.tmp"}) {
		t.Errorf("while writing the folder holds %q, want only s.tar.tmp", got)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ls(t, dir); !slices.Equal(got, []string{"s.tar"}) {
		t.Errorf("after Close the folder holds %q, want only s.tar", got)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after Close: %v", err)
	}
	if got := ls(t, dir); !slices.Equal(got, []string{"s.tar"}) {
		t.Errorf("Abort after Close removed the shard: %q", got)
	}

	p2 := filepath.Join(dir, "t.tar")
	w, err = PNG().Create(p2, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(&s); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := ls(t, dir); !slices.Equal(got, []string{"s.tar"}) {
		t.Errorf("after Abort the folder holds %q, want only s.tar", got)
	}
}

func ls(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestRejects checks that samples a format cannot hold are refused with
// a message naming the fix, and that the shard stays usable after.
func TestRejects(t *testing.T) {
	good := imageSample("good", 1, 3, 3, 3)
	rgba := imageSample("rgba", 0, 3, 3, 4)
	float := imageSample("float", 0, 3, 3, 3)
	float.Fields[0].DType = formats.Float32
	float.Fields[0].Data = make([]byte, 3*3*3*4)
	short := imageSample("short", 0, 3, 3, 3)
	short.Fields[0].Data = short.Fields[0].Data[:5]
	none := formats.Sample{Key: "none"}
	sound := audio("sound", formats.Int16, 10, 1, 8000)
	badRate := audio("rate", formats.Int16, 10, 1, 8000)
	badRate.Rate = 0
	u8audio := audio("u8", formats.Int16, 10, 1, 8000)
	u8audio.Fields[0].DType = formats.Uint8
	u8audio.Fields[0].Shape = []int{20, 1}

	for _, tc := range []struct {
		format formats.ShardFormat
		bad    []formats.Sample
		good   formats.Sample
		want   []string
	}{
		{PNG(), []formats.Sample{rgba, float, short, none, sound}, good,
			[]string{"4 channels", "--format hdf5", "needs 27 bytes", "no fields", "--format wav"}},
		{WAV(), []formats.Sample{good, badRate, u8audio}, sound,
			[]string{"--format png", "--format png", "int16 or float32"}},
	} {
		p := filepath.Join(t.TempDir(), "s.tar")
		w, err := tc.format.Create(p, formats.ShardMeta{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.bad {
			err := w.Add(&tc.bad[i])
			if err == nil || !strings.Contains(err.Error(), tc.want[i]) || !strings.Contains(err.Error(), tc.bad[i].Key) {
				t.Errorf("%s shard, sample %s: error %v, want one naming the sample and %q", tc.format.Name(), tc.bad[i].Key, err, tc.want[i])
			}
		}
		if err := w.Add(&tc.good); err != nil {
			t.Fatalf("%s shard refuses a good sample after bad ones: %v", tc.format.Name(), err)
		}
		info, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, p)
		if info.Count != 1 || len(got) != 1 || got[0].Key != tc.good.Key {
			t.Errorf("%s shard holds %d samples (info %d), want only %s", tc.format.Name(), len(got), info.Count, tc.good.Key)
		}
	}
}

func TestDescribe(t *testing.T) {
	samples := imageSamples()[4:] // the clip first
	p, info := writeShard(t, PNG(), t.TempDir(), samples)
	sum, err := Describe(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{
		ShardInfo: info,
		Members:   []string{"NNNN.png", "cls", "json"},
		Key:       "video/clip.mp4#f0",
		DType:     formats.Uint8,
		Shape:     []int{3, 8, 12, 3},
	}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("Describe = %+v, want %+v", sum, want)
	}

	p, info = writeShard(t, WAV(), t.TempDir(), []formats.Sample{audio("s", formats.Float32, 30, 2, 22050)})
	sum, err = Describe(p)
	if err != nil {
		t.Fatal(err)
	}
	want = Summary{ShardInfo: info, Members: []string{"cls", "json", "wav"}, Key: "s",
		DType: formats.Float32, Shape: []int{30, 2}, Rate: 22050}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("Describe = %+v, want %+v", sum, want)
	}
}

// chunks hands out data in pieces of n bytes, as a file read in chunks.
type chunks struct {
	data []byte
	n    int
	pos  int
}

func (c *chunks) Chunk() ([]byte, error) {
	if c.pos >= len(c.data) {
		return nil, io.EOF
	}
	b := c.data[c.pos:min(c.pos+c.n, len(c.data))]
	c.pos += len(b)
	return b, nil
}

// TestScannerReusesBuffers checks the documented contract: a Scanner that
// has read a shard once reads it again allocating only the keys, whether
// its members lie whole in a chunk or straddle two and are copied out.
func TestScannerReusesBuffers(t *testing.T) {
	samples := []formats.Sample{imageSample("cat/001", 0, 40, 40, 3), imageSample("cat/002", 1, 40, 40, 3), imageSample("dog/003", 0, 40, 40, 3)}
	p, _ := writeShard(t, PNG(), t.TempDir(), samples)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{512, 3 * 512, 1000, len(data)} {
		var s Scanner
		c := &chunks{data: data, n: n}
		keys := 0
		scan := func() {
			c.pos = 0
			if err := s.Scan(c, func(key string, m map[string][]byte) error {
				keys++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		scan()
		if keys != len(samples) {
			t.Fatalf("chunks of %d: %d samples, want %d", n, keys, len(samples))
		}
		if a := testing.AllocsPerRun(5, scan); a != float64(len(samples)) {
			t.Errorf("chunks of %d: %.0f allocations a shard once warm, want %d, one a key", n, a, len(samples))
		}
	}
}

// BenchmarkPNGShard writes 224×224×3 samples to a PNG shard;
// BenchmarkRawShard writes the same bytes as plain tar members, the
// baseline for what the PNG framing costs.
func BenchmarkPNGShard(b *testing.B) {
	benchShard(b, PNG(), imageSample("cat/001.jpg", 1, 224, 224, 3))
}

func BenchmarkWAVShard(b *testing.B) {
	benchShard(b, WAV(), audio("clip.flac", formats.Int16, 48000, 2, 48000))
}

func BenchmarkRawShard(b *testing.B) {
	data := imageSample("cat/001.jpg", 1, 224, 224, 3).Fields[0].Data
	b.SetBytes(int64(len(data)))
	file, err := os.Create(filepath.Join(b.TempDir(), "raw.tar"))
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	buf := bufio.NewWriterSize(file, 1<<20)
	h := hashWriter{w: buf, h: sha256.New()}
	tw := tar.NewWriter(&h)
	b.ResetTimer()
	for i := range b.N {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("k%08d.bin", i), Size: int64(len(data)), Mode: 0o644, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := buf.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		b.Fatal(err)
	}
}

func benchShard(b *testing.B, f formats.ShardFormat, s formats.Sample) {
	b.SetBytes(int64(len(s.Fields[0].Data)))
	w, err := f.Create(filepath.Join(b.TempDir(), "bench.tar"), formats.ShardMeta{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s#%d", s.Key, i)
	}
	b.ResetTimer()
	for i := range b.N {
		s.Key = keys[i]
		if err := w.Add(&s); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// TestDiskFull writes a shard onto /dev/full: the write error must reach
// Add or Close, and no file may appear under the final name.
func TestDiskFull(t *testing.T) {
	testenv.NeedFile(t, "/dev/full", "create it with mknod -m 666 /dev/full c 1 7")
	dir := t.TempDir()
	p := filepath.Join(dir, "s.tar")
	if err := os.Symlink("/dev/full", formats.TempName(p)); err != nil {
		t.Fatal(err)
	}
	w, err := PNG().Create(p, formats.ShardMeta{})
	if err != nil {
		t.Fatal(err)
	}
	s := imageSample("k", 0, 224, 224, 3)
	var addErr error
	for i := 0; i < 20 && addErr == nil; i++ {
		s.Key = fmt.Sprint("k", i)
		addErr = w.Add(&s)
	}
	_, closeErr := w.Close()
	if addErr == nil && closeErr == nil {
		t.Fatal("writing 3 MB to /dev/full succeeded")
	}
	if closeErr == nil || !strings.Contains(closeErr.Error(), "no space") {
		t.Errorf("Close: %v, want the disk-full error", closeErr)
	}
	if got := ls(t, dir); len(got) != 0 {
		t.Errorf("after a failed Close the folder holds %q", got)
	}
}

// TestNamesKeptExactly: keys of any bytes a Linux file system allows
// (not UTF-8, a 255-byte file name, longer segments from a list) give
// member names whose every path component fits in 255 bytes, so GNU tar
// and Python's tarfile extract the shard, and KEY.json gives back each
// key exactly (bytes that are not UTF-8 as \udcXX).
func TestNamesKeptExactly(t *testing.T) {
	name255 := strings.Repeat("y", 251) + ".jpg"
	long := strings.Repeat("z", 300)
	keys := []string{
		"caf\xe9/x.jpg",
		"caf\xe8/x.jpg",
		"a\nb/x.jpg",
		"plain/" + name255,
		"caf\xe8/" + name255, // its stem collides with the next one's: a collision suffix too
		"caf\xe9/" + name255,
		long + "/" + long + "#c0",
	}
	var samples []formats.Sample
	for i, k := range keys {
		samples = append(samples, imageSample(k, int64(i), 2, 2, 3))
	}
	// A field whose name is longer than any member name can hold, on the
	// sample with the longest stem: a 254-byte member name.
	samples[5].Fields = append(samples[3].Fields, formats.Field{Name: "npz/" + strings.Repeat("f", 250),
		Tensor: formats.Tensor{DType: formats.Uint8, Shape: []int{1}, Data: []byte{7}}})
	dir := t.TempDir()
	p, _ := writeShard(t, PNG(), dir, samples)

	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(f)
	var names []string
	longest := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		for _, c := range strings.Split(h.Name, "/") {
			longest = max(longest, len(c))
			if len(c) > 255 {
				t.Errorf("member %q has a %d-byte path component; Linux takes 255 at most", h.Name, len(c))
			}
		}
		if h.Name == "plain/"+strings.Repeat("y", 191)+"-"+fnvHex(name255)+".json" {
			// the cut stem of name255, as docs/FORMAT.md §6.2 spells it
			names = append(names, "found-cut")
		}
	}
	f.Close()
	if longest != 254 {
		t.Errorf("longest member name component is %d bytes; the worst case here is 254", longest)
	}
	if !slices.Contains(names, "found-cut") {
		t.Errorf("no member for %q cut as §6.2 says; members %q", name255, names)
	}

	for i, s := range readAll(t, p) {
		if s.Key != keys[i] {
			t.Errorf("sample %d: KEY.json gives key %q, want %q", i, s.Key, keys[i])
		}
		if s.Source != "/data/"+keys[i] {
			t.Errorf("sample %d: KEY.json gives source %q, want %q", i, s.Source, "/data/"+keys[i])
		}
	}

	if gnu, err := exec.LookPath("tar"); err == nil {
		out := t.TempDir()
		if b, err := exec.Command(gnu, "-xf", p, "-C", out).CombinedOutput(); err != nil {
			t.Errorf("tar -xf %s: %v\n%s", p, err, b)
		}
	}
	py := testenv.NeedPython(t)
	out := t.TempDir()
	script := "import sys, tarfile\nwith tarfile.open(sys.argv[1]) as t:\n    t.extractall(sys.argv[2])\n"
	if b, err := exec.Command(py, "-c", script, p, out).CombinedOutput(); err != nil {
		t.Errorf("python tarfile extractall: %v\n%s", err, b)
	}
}
