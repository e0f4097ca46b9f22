package npy

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"

	"github.com/prep-dev/prep/formats"
)

// ParseNPZ decodes an .npz archive (np.savez or np.savez_compressed: a
// zip of .npy members, stored or deflated). Each member becomes a Field
// named after the member without ".npy". Fields are sorted by name, not
// kept in the zip's order, so the output never depends on how the
// archive was written. Stored members that need no conversion share
// memory with data.
//
// maxInflate, when above 0, bounds the bytes the deflated members may
// inflate to together: a small archive can claim gigabytes (1032:1 is
// deflate's ratio), and the claim is refused before anything is allocated.
func ParseNPZ(data []byte, maxInflate int64) ([]formats.Field, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not an .npz (zip) archive: %w", err)
	}
	if err := checkInflate(zr.File, len(data), maxInflate); err != nil {
		return nil, err
	}
	fields := make([]formats.Field, 0, len(zr.File))
	seen := map[string]bool{}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue // a directory entry holds no array
		}
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || name == "" {
			return nil, fmt.Errorf("member %q is not a .npy array", f.Name)
		}
		if seen[name] {
			return nil, fmt.Errorf("member %q appears twice", f.Name)
		}
		seen[name] = true
		raw, err := member(data, f)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", f.Name, err)
		}
		t, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", f.Name, err)
		}
		fields = append(fields, formats.Field{Name: name, Tensor: t})
	}
	if len(fields) == 0 {
		return nil, errors.New("the .npz archive holds no arrays")
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Name < fields[j].Name })
	return fields, nil
}

// checkInflate refuses an archive whose deflated members claim more than
// limit bytes in all. (member checks each claim against the data read.)
func checkInflate(files []*zip.File, size int, limit int64) error {
	if limit <= 0 {
		return nil
	}
	var total uint64
	for _, f := range files {
		if f.Method != zip.Store {
			total += f.UncompressedSize64
		}
	}
	if total > uint64(limit) {
		mib := func(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }
		return fmt.Errorf("its compressed members inflate to %s from a %s file, over the limit of %s a sample (--max-sample-bytes: raise it if the file is genuine)",
			mib(float64(total)), mib(float64(size)), mib(float64(limit)))
	}
	return nil
}

// member returns the uncompressed bytes of one zip entry. Stored entries
// (np.savez's default, often large) are sliced out of data without a copy
// and checked against their CRC-32.
func member(data []byte, f *zip.File) ([]byte, error) {
	if f.Flags&0x1 != 0 {
		return nil, errors.New("encrypted zip members are not supported")
	}
	if f.Method == zip.Store {
		off, err := f.DataOffset()
		if err != nil {
			return nil, err
		}
		size := f.UncompressedSize64
		if f.CompressedSize64 != size || off < 0 || uint64(off) > uint64(len(data)) || size > uint64(len(data))-uint64(off) {
			return nil, fmt.Errorf("truncated zip member: it needs %d bytes at offset %d, the archive holds %d", size, off, len(data))
		}
		raw := data[off : uint64(off)+size]
		if crc32.ChecksumIEEE(raw) != f.CRC32 {
			return nil, errors.New("zip checksum mismatch: the archive is corrupt")
		}
		return raw, nil
	}
	if f.CompressedSize64 > uint64(len(data)) {
		return nil, fmt.Errorf("truncated zip member: it claims %d compressed bytes, the archive holds %d", f.CompressedSize64, len(data))
	}
	size := f.UncompressedSize64
	if size > formats.MaxDeflateRatio*f.CompressedSize64+1024 {
		return nil, fmt.Errorf("zip member claims %d bytes from %d compressed bytes", size, f.CompressedSize64)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	// Reading to EOF makes archive/zip check the size and CRC-32.
	if n, err := rc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errors.New("member is longer than its header says")
		}
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf, nil
}
