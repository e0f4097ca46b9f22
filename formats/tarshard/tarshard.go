// Package tarshard writes and reads tar shards in the WebDataset layout:
// each sample is a run of members KEY.png (or KEY.wav), KEY.cls and
// KEY.json, with images stored as uncompressed PNG and audio as WAVE, so
// shards read at disk speed and open with any tar, PNG or WAV reader.
//
// Shards are reproducible: equal samples give byte-identical files.
// Members carry a zero timestamp, uid/gid 0, no user or group names and
// mode 0644, in sample order. A member whose name fits the 100-byte USTAR
// name field is written as USTAR; a longer one as PAX.
//
// Members of one sample, in order:
//
//	KEY.png          Fields[0], uint8 (H,W,3) as RGB, (H,W,1) or (H,W) as grey
//	KEY.0000.png ... Fields[0] of shape (T,H,W,C): one PNG per frame, numbered
//	                 from 0 with at least four digits, so names sort in frame order
//	KEY.wav          Fields[0] of an audio sample (Rate > 0), see package wav
//	KEY.NAME.npy     each further field, as numpy .npy; NAME is the field's name
//	                 without its group (an .npz member "npz/x" is KEY.x.npy)
//	KEY.cls          the label as decimal text, absent for formats.NoLabel
//	KEY.json         {"key","source","label","params"}, key being the original
//
// KEY is the sample key made safe for a member name; see Stem.
package tarshard

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/wav"
)

type format struct {
	name  string
	audio bool
}

// PNG returns the format of tar shards of uncompressed PNG images.
func PNG() formats.ReadWriteFormat { return format{name: "png"} }

// WAV returns the format of tar shards of WAVE audio.
func WAV() formats.ReadWriteFormat { return format{name: "wav", audio: true} }

// Name returns "png" or "wav".
func (f format) Name() string { return f.name }

// Ext returns ".tar".
func (f format) Ext() string { return ".tar" }

// Create starts a shard that is written to formats.TempName(path) and
// renamed to path by Close. meta is recorded by the manifest, not in the
// shard, so the archive holds nothing but samples.
func (f format) Create(path string, meta formats.ShardMeta) (formats.ShardWriter, error) {
	tmp := formats.TempName(path)
	file, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create shard: %w", err)
	}
	w := &writer{format: f, path: path, file: newFileWriter(file)}
	w.tw = tar.NewWriter(w.file)
	return w, nil
}

type writer struct {
	format
	path  string
	file  *fileWriter // hashes while it writes, so Close needs no second read
	tw    *tar.Writer
	stems stems
	png   pngEncoder
	count int
	err   error // a failed write: the archive is incomplete
	done  bool
}

// meta is the content of a KEY.json member. Key and Source keep bytes
// that are not UTF-8 as \udcXX (formats.Name).
type meta struct {
	Key    formats.Name   `json:"key"`
	Source formats.Name   `json:"source"`
	Label  int64          `json:"label"`
	Params map[string]any `json:"params"`
}

// Add appends the members of s. A sample that cannot be stored is rejected
// before anything is written, so the shard stays usable; a failed write
// fails every later call.
func (w *writer) Add(s *formats.Sample) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("add to a closed shard")
	}
	stem, err := w.check(s)
	if err != nil {
		return fmt.Errorf("shard %s: sample %s: %w", w.path, s.Key, err)
	}
	if err := w.write(stem, s); err != nil {
		w.err = fmt.Errorf("write shard %s: %w", w.path, err)
		return w.err
	}
	w.stems.claim(stem, s.Key)
	w.count++
	return nil
}

// check validates s against the format and returns its member stem.
func (w *writer) check(s *formats.Sample) (string, error) {
	if len(s.Fields) == 0 {
		return "", errors.New("no fields")
	}
	primary := s.Fields[0].Tensor
	switch {
	case w.audio && s.Rate <= 0:
		return "", errors.New("not audio (no sample rate); use --format png or hdf5")
	case w.audio:
		if err := wav.Check(primary, s.Rate); err != nil {
			return "", err
		}
	case s.Rate > 0:
		return "", errors.New("audio in a png shard; use --format wav")
	default:
		if _, _, _, _, err := imageLayout(primary); err != nil {
			return "", err
		}
	}
	names := make(map[string]string, len(s.Fields)-1)
	for _, f := range s.Fields[1:] {
		if err := f.Validate(); err != nil {
			return "", fmt.Errorf("field %s: %w", f.Name, err)
		}
		if _, ok := npyDescr[f.DType]; !ok {
			return "", fmt.Errorf("field %s: no npy type for %s", f.Name, f.DType)
		}
		name := fieldName(f.Name)
		if prev, dup := names[name]; dup {
			return "", fmt.Errorf("fields %q and %q both map to member %s.npy", prev, f.Name, name)
		}
		names[name] = f.Name
	}
	return w.stems.pick(s.Key)
}

// fieldName makes a field name safe as the middle of a member name. A
// field in a group ("npz/x", an .npz member) is named without its group;
// a name over maxField bytes is cut as safeName cuts it.
func fieldName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 && i < len(name)-1 {
		name = name[i+1:]
	}
	if name == "" {
		return "_"
	}
	return safeName(name, maxField)
}

func (w *writer) write(stem string, s *formats.Sample) error {
	primary := s.Fields[0].Tensor
	if w.audio {
		if err := w.header(stem+".wav", wav.Size(primary)); err != nil {
			return err
		}
		if err := wav.Encode(w.tw, primary, s.Rate); err != nil {
			return err
		}
	} else if err := w.writeImage(stem, primary); err != nil {
		return err
	}
	for _, f := range s.Fields[1:] {
		h, err := npyHeader(f.Tensor)
		if err != nil {
			return err
		}
		if err := w.header(stem+"."+fieldName(f.Name)+".npy", int64(len(h)+len(f.Data))); err != nil {
			return err
		}
		if _, err := w.tw.Write(h); err != nil {
			return err
		}
		if _, err := w.tw.Write(f.Data); err != nil {
			return err
		}
	}
	if s.Label != formats.NoLabel {
		if err := w.member(stem+".cls", strconv.AppendInt(nil, s.Label, 10)); err != nil {
			return err
		}
	}
	params := s.Params
	if params == nil {
		params = map[string]any{}
	}
	js, err := json.Marshal(meta{Key: formats.Name(s.Key), Source: formats.Name(s.Source), Label: s.Label, Params: params})
	if err != nil {
		return fmt.Errorf("sample %s params: %w", s.Key, err)
	}
	return w.member(stem+".json", js)
}

func (w *writer) writeImage(stem string, t formats.Tensor) error {
	frames, h, wd, c, _ := imageLayout(t)
	if frames == 0 {
		b, err := w.png.encode(t.Data, h, wd, c)
		if err != nil {
			return err
		}
		return w.member(stem+".png", b)
	}
	digits := max(4, len(strconv.Itoa(frames-1)))
	size := h * wd * c
	for i := range frames {
		b, err := w.png.encode(t.Data[i*size:(i+1)*size], h, wd, c)
		if err != nil {
			return err
		}
		if err := w.member(fmt.Sprintf("%s.%0*d.png", stem, digits, i), b); err != nil {
			return err
		}
	}
	return nil
}

// epoch is every member's modification time, for reproducible archives.
var epoch = time.Unix(0, 0)

func (w *writer) header(name string, size int64) error {
	format := tar.FormatUSTAR
	if len(name) > 100 {
		format = tar.FormatPAX
	}
	return w.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     size,
		Mode:     0o644,
		ModTime:  epoch,
		Format:   format,
	})
}

func (w *writer) member(name string, data []byte) error {
	if err := w.header(name, int64(len(data))); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

// Close ends the archive, syncs it, renames it to its final name and
// syncs the directory, so a shard under its final name is complete.
func (w *writer) Close() (formats.ShardInfo, error) {
	if w.done {
		return formats.ShardInfo{}, errors.New("shard closed twice")
	}
	w.done = true
	tmp := formats.TempName(w.path)
	var (
		size int64
		sums *formats.Sums
		err  = w.err
	)
	if err == nil {
		err = w.tw.Close()
	}
	if err == nil {
		size, sums, err = w.file.close()
	} else {
		w.file.abort()
	}
	if err == nil {
		err = os.Rename(tmp, w.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(w.path))
	}
	if err != nil {
		os.Remove(tmp)
		if err != w.err { // w.err names the shard already
			err = fmt.Errorf("write shard %s: %w", w.path, err)
		}
		return formats.ShardInfo{}, err
	}
	info := formats.ShardInfo{File: filepath.Base(w.path), Count: w.count, Bytes: size}
	sums.Fill(&info)
	return info, nil
}

// Abort removes the unfinished shard. After Close it does nothing.
func (w *writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.file.abort()
	if err := os.Remove(formats.TempName(w.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove unfinished shard: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
