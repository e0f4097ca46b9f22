package audiodec

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/prep-dev/prep/media/pcm"
)

// TestChainedOgg decodes Ogg files made of several logical streams one
// after the other (cat a.ogg b.ogg): every stream, as ffmpeg decodes
// them, not the first alone. The second stream may have its own rate
// and channels.
func TestChainedOgg(t *testing.T) {
	dir := t.TempDir()
	vorbis := func(name, src string, args ...string) []byte {
		p := filepath.Join(dir, name)
		runFFmpeg(t, append(append([]string{"-f", "lavfi", "-i", src}, args...), "-c:a", "libvorbis", p)...)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := vorbis("a.ogg", "sine=f=440:d=1:r=16000")
	b := vorbis("b.ogg", "sine=f=660:d=1.5:r=16000")
	c := vorbis("c.ogg", "sine=f=550:d=0.75:r=22050", "-ac", "2")
	chain := func(name string, parts ...[]byte) string {
		p := filepath.Join(dir, name)
		var all []byte
		for _, part := range parts {
			all = append(all, part...)
		}
		if err := os.WriteFile(p, all, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// At the first stream's rate and channels prep resamples nothing and
	// must give ffmpeg's samples; later streams of another format come
	// converted to it, by ffmpeg in both. (ffmpeg's own -ar on a chain
	// restarts its resampler at every stream, so a resampled comparison
	// would measure that: TestCloseToFFmpeg covers prep's resampling.)
	tests := []struct {
		path     string
		rate, ch int
		dec      Decoder
	}{
		{filepath.Join(dir, "a.ogg"), 16000, 1, "vorbis"}, // one stream: in process
		{chain("ab.ogg", a, b), 16000, 1, "ffmpeg"},
		{chain("aba.ogg", a, b, a), 16000, 1, "ffmpeg"},
		{chain("ac.ogg", a, c), 16000, 1, "ffmpeg"},
		{chain("ca.ogg", c, a), 22050, 2, "ffmpeg"},
	}
	for _, tt := range tests {
		name := filepath.Base(tt.path)
		got, dec := decodeFile(t, tt.path, Options{Rate: tt.rate, Channels: tt.ch})
		ref := runFFmpeg(t, "-i", tt.path, "-f", "f32le", "-")
		if dec != tt.dec || len(got) != len(ref)/4 {
			t.Errorf("%s: decoded by %s, %d samples; ffmpeg gives %d, want them by %s", name, dec, len(got), len(ref)/4, tt.dec)
			continue
		}
		// TestCloseToFFmpeg's bound for Vorbis, past the edges.
		var sig, noise float64
		edge := tt.rate / 10 * tt.ch
		for i := edge; i < len(got)-edge; i++ {
			w := float64(math.Float32frombits(binary.LittleEndian.Uint32(ref[4*i:])))
			sig += w * w
			noise += (float64(got[i]) - w) * (float64(got[i]) - w)
		}
		if snr := 10 * math.Log10(sig/noise); snr < 60 {
			t.Errorf("%s: %.1f dB from ffmpeg, want ≥ 60", name, snr)
		}
		// Resampled, every stream is there too.
		out, _ := decodeFile(t, tt.path, Options{Rate: 8000})
		c, err := pcm.NewConverter(tt.rate, tt.ch, 8000, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.OutFrames(int64(len(ref) / 4 / tt.ch)); int64(len(out)) != want {
			t.Errorf("%s at 8 kHz mono: %d samples, want %d", name, len(out), want)
		}
	}
}
