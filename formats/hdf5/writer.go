// Package hdf5 writes and reads HDF5 shards: one contiguous, unchunked,
// uncompressed dataset per field, aligned and free of timestamps, so a
// shard can be streamed with plain reads at the offsets the manifest
// records and still opens in h5py and h5dump as usual.
package hdf5

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"gonum.org/v1/hdf5"

	"github.com/prep-dev/prep/formats"
)

// Format is the HDF5 shard format.
type Format struct{}

// Name returns "hdf5".
func (Format) Name() string { return "hdf5" }

// Ext returns ".h5".
func (Format) Ext() string { return ".h5" }

// Create starts a shard at path. A contiguous HDF5 dataset needs its final
// length when it is created, so a writer told the shard's length (Expect)
// streams each sample into the file as it comes (stream.go); otherwise, or
// when the samples turn out not to fit that plan, they are gathered in
// memory, in pooled buffers so that successive shards reuse memory
// already touched, and past spillAfter bytes in files beside the shard
// (spill.go).
func (Format) Create(path string, meta formats.ShardMeta) (formats.ShardWriter, error) {
	return &writer{path: path, meta: meta, budget: spillAfter, tailBudget: tailAfter, shapeBudget: shapesAfter}, nil
}

// spare keeps the column buffers of finished shards for the next shard.
// A sync.Pool does not do here: Put parks a buffer in the putting P's
// private slot, which a Get running on another P never sees, so a sink
// goroutine that moved between threads allocated a new shard-sized buffer
// (256 MiB by default) for about one shard in five while the old one sat
// unused (measured: 12 buffers for 59 shards of one run).
//
// It is process-wide state on purpose: Format is an empty value that
// callers write as hdf5.Format{} and pass around by value, so it has
// nowhere to keep buffers, and the buffers must outlive each writer to
// serve the next shard. Only getBuf and putBuf touch it, under its mutex.
// Up to maxSpare shard-sized buffers stay reachable after the last shard
// until the process ends; a writer truncates the buffer it gets, so the
// bytes written never depend on which one that was.
var spare struct {
	sync.Mutex
	bufs []*[]byte
}

// maxSpare bounds the buffers kept: a shard has a few columns.
const maxSpare = 4

func getBuf() *[]byte {
	spare.Lock()
	defer spare.Unlock()
	n := len(spare.bufs)
	if n == 0 {
		return new([]byte)
	}
	b := spare.bufs[n-1]
	spare.bufs[n-1] = nil
	spare.bufs = spare.bufs[:n-1]
	return b
}

func putBuf(b *[]byte) {
	spare.Lock()
	defer spare.Unlock()
	if len(spare.bufs) < maxSpare {
		spare.bufs = append(spare.bufs, b)
	}
}

type column struct {
	name  string
	dtype formats.DType
	shape []int   // the first sample's shape
	fixed bool    // every sample so far has shape
	size  int     // bytes per sample while fixed
	buf   *[]byte // gathered samples; nil while streaming or once spilled
	spill *spill  // gathered samples once the shard's passed the budget
	// rag records the samples' shapes once the column turns ragged
	// (shapes.go); while it is fixed, each shape is just shape.
	rag shapeLog
	n   int // samples added
}

type writer struct {
	path   string
	meta   formats.ShardMeta
	expect int // planned samples (Expect), 0 if unknown
	cols   []*column
	n      int  // samples added
	tail   tail // their labels and keys (tail.go)
	rate   int  // the first sample's audio rate; every sample must share it
	stream *stream
	kept   *stream // the streamed file a shrink keeps the samples in (shrink)
	budget int64   // gathered bytes kept in memory before they spill (spillAfter)
	// tailBudget is the bytes of labels and keys kept in memory before
	// they spill (tailAfter).
	tailBudget int64
	// shapeBudget is the bytes of ragged columns' shapes kept in memory
	// before they spill (shapesAfter); shapesHeld is what they hold.
	shapeBudget, shapesHeld int64
	rec                     []byte // addShape's record, reused
}

// Expect sizes the shard's buffers from the first sample: growing a
// gathered column of hundreds of MB by append copies it about twice over
// into freshly faulted pages, which on the target VMs costs more than
// converting the samples (DESIGN.md).
func (w *writer) Expect(samples int) { w.expect = max(0, samples) }

func (w *writer) Add(s *formats.Sample) error {
	// The pipeline reports a refused sample under its key, so the error
	// does not repeat it.
	if err := w.check(s); err != nil {
		return err
	}
	if w.n == 0 {
		w.rate = s.Rate
		for _, f := range s.Fields {
			w.cols = append(w.cols, &column{name: f.Name, dtype: f.DType, shape: slices.Clone(f.Shape), fixed: true, size: len(f.Data)})
		}
		if err := w.start(); err != nil {
			w.cols = nil // as before the sample
			return err
		}
	}
	if w.stream != nil && !w.fits(s) {
		if err := w.gather(); err != nil {
			return err
		}
	}
	if w.stream == nil && w.heldBytes()+s.Bytes() > w.budget {
		if err := w.spillAll(); err != nil {
			if w.n == 0 { // leave the writer as before the sample
				w.release()
			}
			return err
		}
	}
	if w.stream != nil {
		if err := w.stream.add(s, w.n); err != nil {
			if w.n == 0 { // leave the writer as before the sample
				w.stream.close()
				w.stream, w.cols = nil, nil
				os.Remove(formats.TempName(w.path))
			}
			return fmt.Errorf("write shard %s: %w", w.path, err)
		}
	}
	for i, f := range s.Fields {
		c := w.cols[i]
		if c.fixed && !slices.Equal(f.Shape, c.shape) {
			c.fixed = false
			c.rag.start(c.shape, c.n)
		}
		if !c.fixed {
			if err := w.addShape(i, f.Shape); err != nil {
				return err
			}
		}
		if c.buf != nil {
			*c.buf = append(*c.buf, f.Data...)
		}
		if c.spill != nil {
			// The shard cannot be finished after this: the caller
			// aborts it (a full disk stops the run).
			if err := c.spill.write(f.Data); err != nil {
				return fmt.Errorf("write shard %s: spill %s: %w", w.path, c.name, err)
			}
		}
		c.n++
	}
	if err := w.addTail(s.Label, s.Key); err != nil {
		return err
	}
	w.n++
	return nil
}

// fits reports whether s has a place in the streamed file: the shard is
// not yet full and every field has its column's shape.
func (w *writer) fits(s *formats.Sample) bool {
	if w.n >= w.expect {
		return false
	}
	for i, f := range s.Fields {
		if !slices.Equal(f.Shape, w.cols[i].shape) {
			return false
		}
	}
	return true
}

// buffer gives c a pooled buffer with room for the shard's samples, or
// for the bytes the writer keeps in memory before it spills them, which
// no column passes (Add spills first). Asking for a sample more than
// that made a shard whose first sample was larger than the last shard's
// allocate a second buffer of the budget beside the pooled one.
func (w *writer) buffer(c *column) {
	c.buf = getBuf()
	*c.buf = (*c.buf)[:0]
	need := min(int64(max(w.expect, c.n+1))*int64(c.size), w.budget)
	if int64(cap(*c.buf)) < need {
		*c.buf = make([]byte, 0, need)
	}
}

// Dataset names. A field name is a dataset in the root group, or, as
// "GROUP/NAME", dataset NAME in GROUP (the .npz handler puts archive
// members under "npz/"). A ragged field F gets the datasets F_offsets,
// F_shapes and, when its samples differ in rank, F_ranks beside it; for
// the root field "data" they are plain offsets, shapes and ranks
// (formats.RaggedSuffixes lists the suffixes).

// reserved reports whether a root dataset name is one the writer adds.
func reserved(name string) bool {
	switch name {
	case "labels", "keys", "offsets", "shapes", "ranks":
		return true
	}
	return companionName(name)
}

func companionName(name string) bool {
	for _, c := range formats.RaggedSuffixes {
		if strings.HasSuffix(name, c) {
			return true
		}
	}
	return false
}

// checkName validates a field name as a dataset path.
func checkName(name string) error {
	group, base, nested := strings.Cut(name, "/")
	switch {
	case !nested && (name == "" || strings.Contains(name, ".") || reserved(name)):
	case nested && (group == "" || strings.Contains(group, ".") || reserved(group) ||
		base == "" || base == "." || base == ".." || strings.Contains(base, "/") || companionName(base)):
	default:
		return nil
	}
	return fmt.Errorf("%w: field name %q is reserved or not a plain HDF5 name", formats.ErrIncompatible, name)
}

// check validates a sample whole before any of it is added, so a refused
// sample leaves the shard as it was. Samples may differ in shape and in
// rank (the column turns ragged), not in fields, dtype or audio rate.
func (w *writer) check(s *formats.Sample) error {
	if len(s.Fields) == 0 {
		return fmt.Errorf("%w: no fields", formats.ErrIncompatible)
	}
	if w.n > 0 && len(s.Fields) != len(w.cols) {
		return fmt.Errorf("%w: %d fields, the shard's first sample has %d", formats.ErrIncompatible, len(s.Fields), len(w.cols))
	}
	if w.n > 0 && s.Rate != w.rate {
		return fmt.Errorf("%w: audio rate %d Hz, the shard's first sample has %d (0: not audio)", formats.ErrIncompatible, s.Rate, w.rate)
	}
	groups, names := map[string]bool{}, map[string]bool{}
	for _, f := range s.Fields {
		if names[f.Name] {
			return fmt.Errorf("%w: two fields named %q", formats.ErrIncompatible, f.Name)
		}
		names[f.Name] = true
		if g, _, ok := strings.Cut(f.Name, "/"); ok {
			groups[g] = true
		}
	}
	for i, f := range s.Fields {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if err := checkName(f.Name); err != nil {
			return err
		}
		if groups[f.Name] {
			return fmt.Errorf("%w: field %q is also the group of another field", formats.ErrIncompatible, f.Name)
		}
		if w.n == 0 {
			continue
		}
		c := w.cols[i]
		if f.Name != c.name || f.DType != c.dtype {
			return fmt.Errorf("%w: field %s %s%v does not match the shard's %s %s%v",
				formats.ErrIncompatible, f.Name, f.DType, f.Shape, c.name, c.dtype, c.shape)
		}
	}
	return nil
}

func (w *writer) release() {
	for _, c := range w.cols {
		if c.buf != nil {
			putBuf(c.buf)
		}
		c.buf = nil
		if c.spill != nil {
			c.spill.remove()
		}
		c.spill = nil
		c.rag.release()
	}
	w.cols = nil
	w.shapesHeld = 0
	w.tail.release()
}

func (w *writer) Abort() error {
	w.release()
	if w.stream != nil {
		w.stream.close()
		w.stream = nil
	}
	w.dropKept()
	err := os.Remove(formats.TempName(w.path))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

func (w *writer) Close() (formats.ShardInfo, error) {
	defer w.release()
	defer func() {
		if w.stream != nil { // a failed shrink
			w.stream.close()
			w.stream = nil
		}
		w.dropKept()
	}()
	tmp := formats.TempName(w.path)
	if w.stream != nil && w.n != w.expect {
		// fits keeps more than expected from the stream: here fewer came.
		if err := w.shrink(); err != nil {
			os.Remove(tmp)
			return formats.ShardInfo{}, err
		}
	}
	var infos []formats.DatasetInfo
	var err error
	laidOut := tmp // the file the library lays the shard out in
	if w.kept != nil {
		laidOut = formats.LayoutName(w.path)
	}
	if w.stream != nil {
		infos, err = w.finishStream()
	} else {
		infos, err = w.write(tmp)
	}
	if err == nil {
		err = w.fill(laidOut, infos)
	}
	if err == nil && w.kept != nil {
		err = w.transplant(laidOut)
	}
	if err != nil {
		os.Remove(tmp)
		return formats.ShardInfo{}, fmt.Errorf("write shard %s: %w", w.path, err)
	}
	size, sums, err := syncAndHash(tmp)
	if err != nil {
		os.Remove(tmp)
		return formats.ShardInfo{}, fmt.Errorf("write shard %s: %w", w.path, err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		os.Remove(tmp)
		return formats.ShardInfo{}, err
	}
	info := formats.ShardInfo{
		File:     filepath.Base(w.path),
		Count:    w.n,
		Bytes:    size,
		Datasets: infos,
	}
	sums.Fill(&info)
	return info, nil
}

// write creates the HDF5 file and its datasets.
func (w *writer) write(name string) (infos []formats.DatasetInfo, err error) {
	lockLib()
	defer unlockLib()
	fid, f, err := openShard(name)
	if err != nil {
		return nil, err
	}
	defer func() {
		err = libError(err)
		if cerr := closeFiles(f, fid); err == nil {
			err = cerr
		}
	}()
	n := w.n
	made := map[string]bool{}
	add := func(name string, dtype formats.DType, shape []int, data []byte) error {
		info, err := writeDataset(f, name, dtype, shape, data)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", name, err)
		}
		infos = append(infos, info)
		return nil
	}
	// layOut creates a dataset of int64s for fill to fill.
	layOut := func(name string, shape []int) error {
		if err := add(name, formats.Int64, shape, nil); err != nil {
			return err
		}
		infos[len(infos)-1].Size = int64(formats.Tensor{Shape: shape}.Len()) * 8
		return nil
	}
	for _, c := range w.cols {
		if err := makeGroup(f, c.name, made); err != nil {
			return nil, err
		}
		// A spilled column's dataset is only laid out here: Close fills it
		// once the library has let go of the file (fill).
		data := func(shape []int) error {
			if c.spill == nil {
				return add(c.name, c.dtype, shape, *c.buf)
			}
			if size := int64(formats.Tensor{Shape: shape}.Len() * c.dtype.Size()); size != c.spill.n {
				return fmt.Errorf("dataset %s: %d bytes spilled for shape %v, want %d", c.name, c.spill.n, shape, size)
			}
			if err := add(c.name, c.dtype, shape, nil); err != nil {
				return err
			}
			infos[len(infos)-1].Size = c.spill.n
			return nil
		}
		if c.fixed {
			if err := data(append([]int{n}, c.shape...)); err != nil {
				return nil, err
			}
			continue
		}
		if err := w.layOutRagged(c, data, layOut); err != nil {
			return nil, err
		}
	}
	return w.writeTail(f, infos)
}

// openShard creates the file name with prep's file properties and opens
// it a second time through gonum, which cannot pass them; both handles
// share one file, and closeFiles closes them. The caller holds the
// library.
func openShard(name string) (fid int64, f *hdf5.File, err error) {
	if fid, err = createFile(name); err != nil {
		return 0, nil, err
	}
	if f, err = hdf5.OpenFile(name, hdf5.F_ACC_RDWR); err != nil {
		err = libError(err) // before the close below takes the description
		closeFile(fid)
		return 0, nil, err
	}
	return fid, f, nil
}

// makeGroup creates the group of a "GROUP/NAME" field once.
func makeGroup(f *hdf5.File, name string, made map[string]bool) error {
	g, _, ok := strings.Cut(name, "/")
	if !ok || made[g] {
		return nil
	}
	grp, err := f.CreateGroup(g)
	if err != nil {
		return fmt.Errorf("group %s: %w", g, err)
	}
	made[g] = true
	return grp.Close()
}

// writeTail adds what follows the columns: labels, keys and attributes.
// It only lays out labels and keys: Close fills them once the library has
// let go of the file (fillTail).
func (w *writer) writeTail(f *hdf5.File, infos []formats.DatasetInfo) ([]formats.DatasetInfo, error) {
	info, err := writeDataset(f, "labels", formats.Int64, []int{w.n}, nil)
	if err != nil {
		return nil, fmt.Errorf("dataset labels: %w", err)
	}
	info.Size = 8 * int64(w.n)
	infos = append(infos, info)
	if err := layOutKeys(f, w.n, w.keysWidth(), &infos); err != nil {
		return nil, err
	}
	if err := w.writeAttrs(f); err != nil {
		return nil, err
	}
	return infos, nil
}

func (w *writer) writeAttrs(f *hdf5.File) error {
	root, err := f.OpenGroup("/")
	if err != nil {
		return err
	}
	defer root.Close()
	for _, a := range []struct{ name, value string }{
		{"prep_version", w.meta.Version},
		{"recipe", w.meta.Recipe},
	} {
		if err := stringAttr(root, a.name, a.value); err != nil {
			return fmt.Errorf("attribute %s: %w", a.name, err)
		}
	}
	if err := writeClasses(root, w.meta.Classes); err != nil {
		return err
	}
	space, err := hdf5.CreateDataspace(hdf5.S_SCALAR)
	if err != nil {
		return err
	}
	defer space.Close()
	attr, err := root.CreateAttribute("seed", hdf5.T_STD_U64LE, space)
	if err != nil {
		return err
	}
	defer attr.Close()
	seed := w.meta.Seed
	if err := attr.Write(&seed, hdf5.T_STD_U64LE); err != nil {
		return err
	}
	if w.rate == 0 {
		return nil
	}
	// Audio: what a WAV header would say. data is (N, T) for mono and
	// (N, T, C) otherwise, or ragged; channels says which.
	c := w.cols[0]
	channels := 1
	if len(c.shape) == 2 {
		channels = c.shape[1]
	}
	sampleFormat := map[formats.DType]string{formats.Int16: "s16", formats.Float32: "f32"}[c.dtype]
	if sampleFormat == "" {
		sampleFormat = string(c.dtype)
	}
	if err := stringAttr(root, "sample_format", sampleFormat); err != nil {
		return fmt.Errorf("attribute sample_format: %w", err)
	}
	for _, a := range []struct {
		name  string
		value int64
	}{{"sample_rate", int64(w.rate)}, {"channels", int64(channels)}} {
		if err := int64Attr(root, a.name, a.value, space); err != nil {
			return fmt.Errorf("attribute %s: %w", a.name, err)
		}
	}
	return nil
}

func int64Attr(g *hdf5.Group, name string, v int64, space *hdf5.Dataspace) error {
	attr, err := g.CreateAttribute(name, hdf5.T_STD_I64LE, space)
	if err != nil {
		return err
	}
	defer attr.Close()
	return attr.Write(&v, hdf5.T_STD_I64LE)
}

// stringAttr writes a variable-length UTF-8 string attribute of g, which
// h5py reads as str.
// writeClasses records the class names: as the string attribute classes,
// the names joined by "\n", when that splits back into exactly them;
// otherwise (a name holds a newline, or the one name is empty) as the
// attribute class_names, one string per name, and no classes, so no
// reader splits a joined string wrongly, and a prep that knows only
// classes refuses the shard rather than misread it.
func writeClasses(root *hdf5.Group, classes []string) error {
	joined := strings.Join(classes, "\n")
	if !slices.Equal(splitClasses(joined), classes) {
		if err := writeStringListAttr(root.ID(), "class_names", classes); err != nil {
			return fmt.Errorf("attribute class_names: %w", err)
		}
		return nil
	}
	if err := stringAttr(root, "classes", joined); err != nil {
		return fmt.Errorf("attribute classes: %w", err)
	}
	return nil
}

// splitClasses is the inverse of the classes attribute's join.
func splitClasses(joined string) []string {
	if joined == "" {
		return nil
	}
	return strings.Split(joined, "\n")
}

func stringAttr(g *hdf5.Group, name, value string) error {
	return writeStringAttr(g.ID(), name, value)
}

// layOutKeys creates the dataset of n keys as fixed-length strings of
// width bytes (h5py: |S<width>), because gonum's variable-length string
// writes crash (DESIGN.md).
func layOutKeys(f *hdf5.File, n, width int, infos *[]formats.DatasetInfo) error {
	t, err := hdf5.T_C_S1.Copy()
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.SetSize(width); err != nil {
		return err
	}
	info, err := create(f, "keys", t, []int{n}, nil)
	if err != nil {
		return fmt.Errorf("dataset keys: %w", err)
	}
	info.Size = int64(n) * int64(width)
	info.DType = formats.DType(fmt.Sprintf("S%d", width))
	*infos = append(*infos, info)
	return nil
}

func writeDataset(f *hdf5.File, name string, dtype formats.DType, shape []int, data []byte) (formats.DatasetInfo, error) {
	t, err := fileType(dtype)
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	defer t.Close()
	info, err := create(f, name, t, shape, data)
	info.DType = dtype
	return info, err
}

func create(f *hdf5.File, name string, t *hdf5.Datatype, shape []int, data []byte) (_ formats.DatasetInfo, err error) {
	dims := make([]uint, len(shape))
	for i, d := range shape {
		dims[i] = uint(d)
	}
	space, err := hdf5.CreateSimpleDataspace(dims, nil)
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	defer space.Close()
	dcpl, err := datasetCreatePlist()
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	defer dcpl.Close()
	ds, err := f.CreateDatasetWith(name, t, space, dcpl)
	if err != nil {
		return formats.DatasetInfo{}, err
	}
	defer func() {
		// A small dataset waits in the library's sieve buffer until this
		// close writes it: on a full disk, here is where that fails.
		if cerr := ds.Close(); err == nil && cerr != nil {
			err = libError(cerr)
		}
	}()
	if len(data) > 0 {
		if err := ds.Write(&data[0]); err != nil {
			return formats.DatasetInfo{}, libError(err)
		}
	}
	return formats.DatasetInfo{
		Name:   name,
		Shape:  slices.Clone(shape),
		Offset: datasetOffset(ds),
		Size:   int64(len(data)),
	}, nil
}

// fileType maps a dtype to its little-endian HDF5 type, the one h5py uses
// for the numpy dtype of the same name. The caller closes it.
func fileType(d formats.DType) (*hdf5.Datatype, error) {
	simple := map[formats.DType]*hdf5.Datatype{
		formats.Int8: hdf5.T_STD_I8LE, formats.Int16: hdf5.T_STD_I16LE,
		formats.Int32: hdf5.T_STD_I32LE, formats.Int64: hdf5.T_STD_I64LE,
		formats.Uint8: hdf5.T_STD_U8LE, formats.Uint16: hdf5.T_STD_U16LE,
		formats.Uint32: hdf5.T_STD_U32LE, formats.Uint64: hdf5.T_STD_U64LE,
		formats.Float32: hdf5.T_IEEE_F32LE, formats.Float64: hdf5.T_IEEE_F64LE,
	}
	if t, ok := simple[d]; ok {
		return t.Copy()
	}
	switch d {
	case formats.Float16:
		return newFloat16()
	case formats.Bool:
		return newBool()
	case formats.Complex64, formats.Complex128:
		part, size := hdf5.T_IEEE_F32LE, 8
		if d == formats.Complex128 {
			part, size = hdf5.T_IEEE_F64LE, 16
		}
		c, err := hdf5.NewCompoundType(size)
		if err != nil {
			return nil, err
		}
		// h5py's layout for numpy complex: fields "r" and "i".
		if err := c.Insert("r", 0, part); err != nil {
			return nil, err
		}
		if err := c.Insert("i", size/2, part); err != nil {
			return nil, err
		}
		return &c.Datatype, nil
	}
	return nil, fmt.Errorf("unsupported dtype %q", d)
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// syncAndHash flushes the finished file to disk and returns its size and
// checksums, read back in one pass (libhdf5 writes the file, not us). The
// flush and the read-back run together: on a fresh 38 MB shard each took
// about 25 ms, and nothing else overlaps them at the end of a run.
func syncAndHash(name string) (int64, *formats.Sums, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	synced := make(chan error, 1)
	go func() { synced <- f.Sync() }()
	sums := formats.NewSums()
	buf := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(buf)
	n, err := io.CopyBuffer(sums, f, *buf)
	if serr := <-synced; serr != nil {
		return 0, nil, fmt.Errorf("sync: %w (disk full?)", serr)
	}
	if err != nil {
		return 0, nil, err
	}
	return n, sums, nil
}
