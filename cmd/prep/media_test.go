package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats/manifest"
)

// python runs a script with /usr/bin/python3 (h5py, numpy, PIL) and
// decodes the JSON it prints.
func python(t *testing.T, script string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", append([]string{"-c", script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	return m
}

// convertOK runs prep convert SRC DST ARGS... and returns DST's manifest.
// The test folders hold broken files on purpose (testdata/README.md), far
// over --max-skipped's default share: the media tests accept any share.
var anySkipped = []string{"--max-skipped", "100%"}

func convertOK(t *testing.T, src, dst string, args ...string) *manifest.Manifest {
	t.Helper()
	_, stderr, code := prepRun(t, append(append([]string{"convert", src, dst}, anySkipped...), args...)...)
	if code != 0 {
		t.Fatalf("convert %s %v: exit %d: %s", src, args, code, stderr)
	}
	m, err := manifest.Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// compareTarH5 reads a tar shard with tarfile and PIL and an HDF5 shard
// with h5py and lists every difference in sample order: keys (KEY.json),
// labels (KEY.cls, absent for -1) and pixels (KEY.png, or the frames
// KEY.0000.png... of a clip).
const compareTarH5 = `
import sys, io, json, tarfile, h5py, numpy as np
from PIL import Image
h5 = h5py.File(sys.argv[1], "r")
tf = tarfile.open(sys.argv[2])
samples, order = {}, []
for m in tf.getmembers():
    stem, _, rest = m.name.partition(".")
    if stem not in samples:
        samples[stem] = {}
        order.append(stem)
    samples[stem][rest] = tf.extractfile(m).read()
def rgb(b):
    im = Image.open(io.BytesIO(b))
    if im.mode != "RGB":
        fails.append("PNG mode %s" % im.mode)
    return np.asarray(im)
fails, frames = [], 0
if len(order) != len(h5["keys"]):
    fails.append("%d samples in the tar, %d in the .h5" % (len(order), len(h5["keys"])))
for i, stem in enumerate(order[:len(h5["keys"])]):
    s = samples[stem]
    key, label = h5["keys"][i].decode(), int(h5["labels"][i])
    meta = json.loads(s["json"])
    if meta["key"] != key:
        fails.append("sample %d: tar key %s, h5 key %s" % (i, meta["key"], key))
    cls = int(s["cls"]) if "cls" in s else -1
    if cls != label or ("cls" in s) == (label == -1):
        fails.append("%s: .cls %r, h5 label %d" % (key, s.get("cls"), label))
    if "png" in s:
        px = rgb(s["png"])
    else:
        names = sorted(k for k in s if k.endswith(".png"))
        if names != ["%04d.png" % j for j in range(len(names))]:
            fails.append("%s: clip members %s" % (key, names))
        frames = max(frames, len(names))
        px = np.stack([rgb(s[n]) for n in names])
    if not np.array_equal(px, h5["data"][i]):
        fails.append("%s: pixels differ: png %s, h5 %s" % (key, px.shape, h5["data"][i].shape))
print(json.dumps({"fails": fails, "samples": len(order), "frames": frames}))
`

// TestHDF5AndPNGAgree converts the same inputs with the same random
// recipe and seed to HDF5 and to PNG-in-tar: both must hold the same
// samples, keys, labels and pixels.
func TestHDF5AndPNGAgree(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		args    []string
		samples int
		frames  int // of a clip; 0 for single images
	}{
		{"images", "../../testdata/images", []string{"--recipe", "resize=96,crop=64:random,hflip=0.5,jitter=0.4/0.4/0.4/0.1", "--copies", "2"}, 16, 0},
		// avi 20 frames, mkv 30, mp4 50, webm 36, every 2nd, clips of 4:
		// 2+3+6+4 clips; corrupt.mp4 and the truncated ones are skipped by both.
		{"video clips", "../../testdata/video", []string{"--recipe", "crop=40:random,hflip=0.5", "--every", "2", "--clip", "4"}, 15, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--seed", "9", "--items-per-shard", "1000"}, tt.args...)
			h5Dir, tarDir := t.TempDir(), t.TempDir()
			h5 := convertOK(t, tt.src, h5Dir, append(args, "--format", "hdf5")...)
			tr := convertOK(t, tt.src, tarDir, append(args, "--format", "png")...)
			if len(h5.Shards) != 1 || len(tr.Shards) != 1 || h5.Samples != tt.samples || tr.Samples != tt.samples {
				t.Fatalf("hdf5: %d samples in %d shards, png: %d in %d; want %d in 1", h5.Samples, len(h5.Shards), tr.Samples, len(tr.Shards), tt.samples)
			}
			got := python(t, compareTarH5, filepath.Join(h5Dir, h5.Shards[0].File), filepath.Join(tarDir, tr.Shards[0].File))
			for _, f := range got["fails"].([]any) {
				t.Error(f)
			}
			if got["samples"] != float64(tt.samples) || got["frames"] != float64(tt.frames) {
				t.Errorf("python read %v samples of %v frames, want %d of %d", got["samples"], got["frames"], tt.samples, tt.frames)
			}
		})
	}
}

// TestTarWorkersDoNotChangeOutput: PNG and WAV tar shards and the
// manifest are byte-identical for --workers 1 and 4.
func TestTarWorkersDoNotChangeOutput(t *testing.T) {
	tests := []struct {
		format, src string
		args        []string
		files       int
	}{
		{"png", "../../testdata/images", []string{"--recipe", demoRecipe + ",rotate=10,jitter=0.4/0.4/0.4/0.1", "--copies", "3", "--items-per-shard", "5"}, 7},
		{"wav", "../../testdata/audio", []string{"--recipe", "gain=-6-0,shift=0.1,noise=20-40", "--copies", "2", "--items-per-shard", "4", "--duration", "1"}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var runs []map[string][]byte
			for _, w := range []string{"1", "4"} {
				dst := t.TempDir()
				convertOK(t, tt.src, dst, append([]string{"--format", tt.format, "--seed", "11", "--workers", w, "--io-workers", w}, tt.args...)...)
				runs = append(runs, readDir(t, dst))
			}
			if len(runs[0]) != tt.files || len(runs[1]) != tt.files {
				t.Fatalf("%d and %d files, want %d shards + manifest + input list", len(runs[0]), len(runs[1]), tt.files-2)
			}
			for name, data := range runs[0] {
				if !bytes.Equal(data, runs[1][name]) {
					t.Errorf("%s differs between --workers 1 and 4", name)
				}
			}
		})
	}
}

// TestAudioWAVReaders: the WAV members of prep's tar shards open in soxi
// and, for 16-bit PCM, Python's wave module, with the rate, channels and
// frame count asked for.
func TestAudioWAVReaders(t *testing.T) {
	for _, tt := range []struct {
		format   string
		encoding string // soxi -e
		bits     string // soxi -b
	}{
		{"s16", "Signed Integer PCM", "16"},
		{"f32", "Floating Point PCM", "32"},
	} {
		t.Run(tt.format, func(t *testing.T) {
			dst := t.TempDir()
			m := convertOK(t, "../../testdata/audio", dst, "--rate", "22050", "--channels", "2", "--duration", "1.5", "--sample-format", tt.format)
			if m.Format != "wav" || m.Samples != 6 || len(m.Skipped) != 2 {
				t.Fatalf("format %s, %d samples, skipped %v; want wav, 6, truncated.mp3 and .wav", m.Format, m.Samples, m.Skipped)
			}
			dir := t.TempDir()
			if out, err := exec.Command("tar", "xf", filepath.Join(dst, m.Shards[0].File), "-C", dir).CombinedOutput(); err != nil {
				t.Fatalf("tar: %v\n%s", err, out)
			}
			wavs, _ := filepath.Glob(filepath.Join(dir, "*.wav"))
			if len(wavs) != 6 {
				t.Fatalf("%d .wav members, want 6", len(wavs))
			}
			for _, w := range wavs {
				var got []string
				for _, opt := range []string{"-r", "-c", "-s", "-e", "-b"} {
					out, err := exec.Command("soxi", opt, w).Output()
					if err != nil {
						t.Fatalf("soxi %s %s: %v", opt, w, err)
					}
					got = append(got, strings.TrimSpace(string(out)))
				}
				if want := []string{"22050", "2", "33075", tt.encoding, tt.bits}; strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s: soxi rate|channels|frames|encoding|bits = %q, want %q", filepath.Base(w), got, want)
				}
			}
			if tt.format != "s16" {
				return // wave reads PCM integers only
			}
			got := python(t, `
import sys, json, wave
out = {}
for p in sys.argv[1:]:
    with wave.open(p) as w:
        out[p] = [w.getframerate(), w.getnchannels(), w.getnframes(), w.getsampwidth(), len(w.readframes(w.getnframes()))]
print(json.dumps(out))`, wavs...)
			for _, w := range wavs {
				if want := []any{22050.0, 2.0, 33075.0, 2.0, 33075.0 * 4}; !jsonSame(got[w], want) {
					t.Errorf("%s: wave rate, channels, frames, width, bytes = %v, want %v", filepath.Base(w), got[w], want)
				}
			}
		})
	}
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestMediaKindsCLI converts each media kind of testdata through the CLI
// with default flags: the format follows the inputs, bad files are
// skipped with a reason that does not repeat their key.
func TestMediaKindsCLI(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		args    []string
		format  string
		samples int
		skipped map[string]string // key: reason prefix
		dataset string            // the manifest's first dataset, as name:dtype:shape
	}{
		{"video", "../../testdata/video", []string{"--every", "10"}, "hdf5", 14,
			map[string]string{"corrupt.mp4": "cut off: the MP4/MOV index (moov atom) is missing; copy or download the file again (ffmpeg: [mov,mp4",
				"truncated.mkv": "ffmpeg: video cut off or damaged: 3 frames decoded, then ffmpeg reported: [matroska,webm] File ended prematurely",
				"truncated.mp4": "ffmpeg: video cut off or damaged: 2 frames decoded"}, "data:uint8:[14 48 64 3]"},
		{"audio", "../../testdata/audio", nil, "wav", 6,
			map[string]string{"truncated.wav": "damaged WAV: its header ends before the audio data; re-encode or remove the file",
				"truncated.mp3": "MP3 cut off: 20783 of the 44100 samples its Info header announces; copy the file again or remove it"}, ""},
		{"audio as hdf5", "../../testdata/audio", []string{"--format", "hdf5", "--duration", "1"}, "hdf5", 6,
			map[string]string{"truncated.wav": "damaged WAV", "truncated.mp3": "MP3 cut off"}, "data:int16:[6 16000]"},
		// Every dtype and rank: a shard per file, as dtypes differ.
		{"npy", "../../testdata/npy/ok", []string{"--items-per-shard", "1"}, "hdf5", 42, nil, ""},
		{"bad npy", badNPY(t), nil, "hdf5", 1, map[string]string{
			"bytes.npy": "string arrays", "datetime.npy": "", "extra_bytes.npy": "", "longdouble.npy": "",
			"object.npy": "object arrays are not supported", "structured.npy": "", "structured_utf8_v3.npy": "",
			"truncated_data.npy": "truncated", "truncated_header.npy": "", "unicode.npy": "",
		}, "data:float32:[1 3 4]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := t.TempDir()
			stdout, stderr, code := prepRun(t, append(append([]string{"convert", tt.src, dst}, anySkipped...), tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for key, reason := range tt.skipped {
				if !strings.Contains(stdout, key+": "+reason) {
					t.Errorf("summary lacks %q:\n%s", key+": "+reason, stdout)
				}
				if strings.Contains(stdout, key+": "+key) || strings.Contains(stdout, key+": ffmpeg "+key) {
					t.Errorf("summary repeats the key %s:\n%s", key, stdout)
				}
			}
			m, err := manifest.Read(dst)
			if err != nil {
				t.Fatal(err)
			}
			if m.Format != tt.format || m.Samples != tt.samples || len(m.Skipped) != len(tt.skipped) {
				t.Errorf("format %s, %d samples, skipped %v; want %s, %d, %d skipped", m.Format, m.Samples, m.Skipped, tt.format, tt.samples, len(tt.skipped))
			}
			if tt.dataset != "" {
				d := m.Shards[0].Datasets[0]
				if got := fmt.Sprintf("%s:%s:%v", d.Name, d.DType, d.Shape); got != tt.dataset {
					t.Errorf("first dataset %s, want %s", got, tt.dataset)
				}
			}
			if out, _, code := prepRun(t, "inspect", dst, "--verify"); code != 0 {
				t.Errorf("inspect --verify exit %d:\n%s", code, out)
			}
		})
	}
}

// badNPY is a folder of testdata/npy/bad and one good array, good.npy.
func badNPY(t *testing.T) string {
	dir := t.TempDir()
	files, _ := filepath.Glob("../../testdata/npy/bad/*.npy")
	for _, f := range append(files, "../../testdata/npy/ok/f4_le.npy") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		if strings.Contains(f, "/ok/") {
			name = "good.npy"
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMixedRankNPY: arrays of rank 2 and 3 convert into one ragged
// dataset, however the shards split them.
func TestMixedRankNPY(t *testing.T) {
	src := t.TempDir()
	script := `
import sys, numpy as np
np.save(sys.argv[1] + "/a.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
np.save(sys.argv[1] + "/b.npy", np.arange(30, dtype=np.float32).reshape(2, 3, 5))
np.save(sys.argv[1] + "/c.npy", np.arange(4, dtype=np.float32).reshape(2, 2))
print("{}")`
	python(t, script, src)
	for _, per := range []string{"1", "2", "3"} {
		dst := t.TempDir()
		m := convertOK(t, src, dst, "--items-per-shard", per)
		if m.Samples != 3 || len(m.Skipped) != 0 {
			t.Fatalf("--items-per-shard %s: %d samples, skipped %v", per, m.Samples, m.Skipped)
		}
		var files []string
		for _, s := range m.Shards {
			files = append(files, filepath.Join(dst, s.File))
		}
		got := python(t, `
import sys, json, h5py, numpy as np
out = {}
for p in sys.argv[2:]:
    f = h5py.File(p, "r")
    for i, k in enumerate(f["keys"][...]):
        want = np.load(sys.argv[1] + "/" + k.decode())
        if "offsets" in f:
            lo, hi = f["offsets"][i:i+2]
            rank = f["ranks"][i] if "ranks" in f else f["shapes"].shape[1]
            x = f["data"][lo:hi].reshape(f["shapes"][i][:rank])
        else:
            x = f["data"][i]
        out[k.decode()] = bool(np.array_equal(x, want)) and x.shape == want.shape
print(json.dumps(out))`, append([]string{src}, files...)...)
		if !jsonSame(got, map[string]any{"a.npy": true, "b.npy": true, "c.npy": true}) {
			t.Errorf("--items-per-shard %s: read back equal to np.load: %v", per, got)
		}
	}
}

func TestPickFormatDefaults(t *testing.T) {
	listing := func(keys ...string) *convert.Listing {
		l := &convert.Listing{}
		for _, k := range keys {
			l.Entries = append(l.Entries, convert.Entry{Key: k})
		}
		return l
	}
	tests := []struct {
		flag string
		l    *convert.Listing
		want string
	}{
		{"", listing("a.wav", "b/c.FLAC", "d.opus"), "wav"},
		{"", listing("a.wav", "b.jpg"), "hdf5"},
		{"", listing("a.mp4"), "hdf5"},
		{"", listing("a.npy", "b.npz"), "hdf5"},
		{"", listing("a.png"), "hdf5"},
		{"", listing(), "hdf5"},
		{"png", listing("a.wav"), "png"},
		{"hdf5", listing("a.wav"), "hdf5"},
		{"wav", listing("a.jpg"), "wav"},
	}
	for _, tt := range tests {
		f, err := pickFormat(tt.flag, tt.l)
		if err != nil || f.Name() != tt.want {
			t.Errorf("pickFormat(%q, %d entries) = %v, %v; want %s", tt.flag, len(tt.l.Entries), f, err, tt.want)
		}
	}
	if _, err := pickFormat("mp4", listing("a.mp4")); err == nil || !strings.Contains(err.Error(), "want hdf5, png or wav") {
		t.Errorf("pickFormat(mp4): %v", err)
	}
}

// TestMediaFlagErrors: bad media flags are usage errors (exit 2) that
// name the flag, and nothing is created in DST.
func TestMediaFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		args []string
		want string
	}{
		{"clip 0", "../../testdata/video", []string{"--clip", "0"}, "--clip 0: must be at least 1"},
		{"negative fps", "../../testdata/video", []string{"--fps", "-1"}, "--fps -1: must be positive"},
		{"every 0", "../../testdata/video", []string{"--every", "0"}, "--every 0: must be at least 1"},
		{"max frames", "../../testdata/video", []string{"--max-frames", "-2"}, "--max-frames -2"},
		{"rate", "../../testdata/audio", []string{"--rate", "0"}, "--rate 0: want a sample rate"},
		{"channels", "../../testdata/audio", []string{"--channels", "33"}, "--channels 33: want 1..32"},
		{"duration", "../../testdata/audio", []string{"--duration", "-1"}, "--duration -1"},
		{"duration NaN", "../../testdata/audio", []string{"--duration", "NaN"}, "--duration NaN"},
		{"duration too long", "../../testdata/audio", []string{"--duration", "1e9"}, "makes every audio sample 29802.32 GiB, over --max-sample-bytes 1GiB"},
		{"duration at f32", "../../testdata/audio", []string{"--duration", "3600", "--sample-format", "f32", "--max-sample-bytes", "200MB"},
			"--duration 3600 at 16000 Hz × 1 channels makes every audio sample 219.7 MiB, over --max-sample-bytes 200MB"},
		{"sample format", "../../testdata/audio", []string{"--sample-format", "u8"}, `--sample-format "u8": want s16 or f32`},
		{"fps without video", "../../testdata/images", []string{"--fps", "2"}, "--fps applies to video inputs"},
		{"clip without video", "../../testdata/audio", []string{"--clip", "4"}, "--clip applies to video inputs"},
		{"rate without audio", "../../testdata/images", []string{"--rate", "8000"}, "--rate applies to audio inputs"},
		{"sample format without audio", "../../testdata/video", []string{"--sample-format", "f32"}, "--sample-format applies to audio inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "out")
			_, stderr, code := prepRun(t, append([]string{"convert", tt.src, dst}, tt.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d (want %d), stderr %q, want it to contain %q", code, exitUsage, stderr, tt.want)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Errorf("DST was created: %v", err)
			}
		})
	}
}

// TestNoFFmpeg: with no ffmpeg on PATH, media inputs fail the run before
// DST is created, with a message that says how to install it; images
// still convert.
func TestNoFFmpeg(t *testing.T) {
	bin := prepBinary(t)
	for _, src := range []string{"../../testdata/video", "../../testdata/audio"} {
		dst := filepath.Join(t.TempDir(), "out")
		cmd := exec.Command(bin, "convert", src, dst)
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(string(out), "ffmpeg not found on PATH") {
			t.Errorf("%s: %v, output %q; want exit 1 and ffmpeg not found", src, err, out)
		}
		if _, err := os.Stat(dst); !os.IsNotExist(err) {
			t.Errorf("%s: DST was created: %v", src, err)
		}
	}
	cmd := exec.Command(bin, "convert", "../../testdata/images", filepath.Join(t.TempDir(), "out"), "--recipe", "resize=32")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("images without ffmpeg: %v\n%s", err, out)
	}
}

// TestFailedRunLeavesNoEmptyDST: a run that fails before writing a shard
// removes the folder it created, and leaves one the user made alone.
func TestFailedRunLeavesNoEmptyDST(t *testing.T) {
	for _, made := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "out")
		if made {
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, stderr, code := prepRun(t, "convert", "../../testdata/npy/bad", dst)
		if code != exitFailure || !strings.Contains(stderr, "none of the first inputs could be converted") ||
			!strings.Contains(stderr, ".npy: ") {
			t.Errorf("exit %d, stderr %q: want exit %d naming the failing file", code, stderr, exitFailure)
		}
		_, err := os.Stat(dst)
		if made && err != nil {
			t.Errorf("the user's empty DST was removed: %v", err)
		}
		if !made && !os.IsNotExist(err) {
			t.Errorf("the DST this run created is still there: %v", err)
		}
	}
}
