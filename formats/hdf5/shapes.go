package hdf5

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/prep-dev/prep/formats"
)

// A ragged column has a row of offsets, shapes and ranks per sample, and
// a shard of small images of mixed sizes has many: 300,000 of them kept a
// shape slice each until Close, which then built the three datasets and
// their bytes at once, 289 MB of memory where 30,000 took 81 (issue #14).
// So the writer records each shape as a few bytes, up to shapesAfter
// bytes a shard, then in a scratch file per column beside the shard, and
// keeps only running values: the largest rank, whether ranks differ, and
// the elements so far (the last offset). Close lays the datasets out and
// fills them from the records in bounded blocks once the library has let
// go of the file, as it does the labels and keys (tail.go).
const shapesAfter = 1 << 20

// shapeBlock is how many bytes of offsets, shapes and ranks together
// Close writes at a time, at most the size of copyBufPool's buffers; a
// variable for tests.
var shapeBlock = 1 << 20

// shapeLog records the shapes of a ragged column's samples. The samples
// before the column turned ragged all have its first shape and are only
// counted (lead); each later one is a record of its rank and dimensions
// as uvarints.
type shapeLog struct {
	lead  int     // samples before the column turned ragged
	n     int     // shapes recorded after those
	rank0 int     // the first sample's rank
	rank  int     // the largest rank
	mixed bool    // the samples differ in rank
	elems int64   // elements of all the samples: the last offset
	recs  records // in memory, or spilled once the shard's passed the budget
}

// start begins the log of a column whose first n samples had shape.
func (r *shapeLog) start(shape []int, n int) {
	*r = shapeLog{lead: n, rank0: len(shape), rank: len(shape), elems: int64(n) * elements(shape)}
}

func elements(shape []int) int64 {
	e := int64(1)
	for _, d := range shape {
		e *= int64(d)
	}
	return e
}

// shapeSpillName is the name of column k's shapes scratch file:
// SpillName's numbers after the labels' and keys', so IsTemp knows it.
func (w *writer) shapeSpillName(k int) string {
	return formats.SpillName(w.path, len(w.cols)+2+k)
}

// addShape records the shape of a sample of the ragged column k, moving
// the shapes held in memory to their scratch files first when this one
// would pass the writer's budget for them.
func (w *writer) addShape(k int, shape []int) error {
	r := &w.cols[k].rag
	w.rec = binary.AppendUvarint(w.rec[:0], uint64(len(shape)))
	for _, d := range shape {
		w.rec = binary.AppendUvarint(w.rec, uint64(d))
	}
	if !r.recs.spilled() && w.shapesHeld+int64(len(w.rec)) > w.shapeBudget {
		if err := w.spillShapes(); err != nil {
			return fmt.Errorf("write shard %s: %w", w.path, err)
		}
	}
	if !r.recs.spilled() {
		w.shapesHeld += int64(len(w.rec))
	}
	if err := r.recs.write(w.rec); err != nil {
		// The shard cannot be finished after this: the caller aborts it.
		return fmt.Errorf("write shard %s: spill %s shapes: %w", w.path, w.cols[k].name, err)
	}
	r.n++
	r.rank = max(r.rank, len(shape))
	r.mixed = r.mixed || len(shape) != r.rank0
	r.elems += elements(shape)
	return nil
}

// spillShapes moves every ragged column's shapes held in memory to its
// scratch file. A column that turns ragged later starts in memory again.
func (w *writer) spillShapes() error {
	for k, c := range w.cols {
		r := &c.rag.recs
		if c.fixed || r.spilled() {
			continue
		}
		held := r.held()
		if err := r.spillTo(w.shapeSpillName(k)); err != nil {
			return fmt.Errorf("spill %s shapes: %w", c.name, err)
		}
		w.shapesHeld -= held
	}
	return nil
}

// layOutRagged lays out the datasets of a ragged column c whose data
// lays out: the elements flat, element offsets (n+1) and shapes (n,
// rank). When the samples differ in rank, shapes has as many columns as
// the largest rank, a shorter shape is padded with -1, and ranks (n,)
// holds each rank. fillShapes fills all but the elements.
func (w *writer) layOutRagged(c *column, data func(shape []int) error, layOut func(name string, shape []int) error) error {
	n, r := c.n, &c.rag
	if n != r.lead+r.n {
		return fmt.Errorf("dataset %s: %d shapes for %d samples", c.name, r.lead+r.n, n)
	}
	if err := data([]int{int(r.elems)}); err != nil {
		return err
	}
	if err := layOut(companion(c.name, "_offsets"), []int{n + 1}); err != nil {
		return err
	}
	if err := layOut(companion(c.name, "_shapes"), []int{n, r.rank}); err != nil {
		return err
	}
	if r.mixed {
		return layOut(companion(c.name, "_ranks"), []int{n})
	}
	return nil
}

// fillShapes writes a ragged column's offsets, shapes and, when its
// ranks differ, ranks into the datasets layOutRagged laid out in the
// finished file fd, shapeBlock bytes at a time.
func (c *column) fillShapes(fd *os.File, infos []formats.DatasetInfo) error {
	r := &c.rag
	n := c.n
	offsets, err := laidOut(infos, companion(c.name, "_offsets"), int64(n)+1)
	if err != nil {
		return err
	}
	shapes, err := laidOut(infos, companion(c.name, "_shapes"), int64(n)*int64(r.rank))
	if err != nil {
		return err
	}
	var ranks formats.DatasetInfo
	if r.mixed {
		if ranks, err = laidOut(infos, companion(c.name, "_ranks"), int64(n)); err != nil {
			return err
		}
	}
	src, err := r.recs.reader()
	if err != nil {
		return fmt.Errorf("dataset %s: spill: %w", shapes.Name, err)
	}
	// A block holds per rows of each dataset, as int64s.
	per := max(1, shapeBlock/(8*(r.rank+2)))
	buf := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(buf)
	block := *buf
	if need := 8 * per * (r.rank + 2); need > len(block) { // a rank past the pool's buffers
		block = make([]byte, need)
	}
	offRows, rankRows, shapeRows := block[:8*per], block[8*per:16*per], block[16*per:8*per*(r.rank+2)]
	if _, err := fd.WriteAt(make([]byte, 8), offsets.Offset); err != nil { // the first offset, 0
		return fmt.Errorf("dataset %s: %w", offsets.Name, err)
	}
	dims := make([]int64, 0, r.rank)
	var total int64
	for i := 0; i < n; i += per {
		m := min(per, n-i)
		for j := range m {
			if dims, err = c.shapeOf(i+j, src, dims); err != nil {
				return fmt.Errorf("dataset %s: %w", shapes.Name, err)
			}
			row := shapeRows[8*r.rank*j : 8*r.rank*(j+1)]
			e := int64(1)
			for d := range r.rank {
				v := int64(-1)
				if d < len(dims) {
					v = dims[d]
					e *= v
				}
				binary.LittleEndian.PutUint64(row[8*d:], uint64(v))
			}
			total += e
			binary.LittleEndian.PutUint64(offRows[8*j:], uint64(total))
			binary.LittleEndian.PutUint64(rankRows[8*j:], uint64(len(dims)))
		}
		if _, err := fd.WriteAt(offRows[:8*m], offsets.Offset+8*int64(i+1)); err != nil {
			return fmt.Errorf("dataset %s: %w", offsets.Name, err)
		}
		if _, err := fd.WriteAt(shapeRows[:8*r.rank*m], shapes.Offset+8*int64(r.rank)*int64(i)); err != nil {
			return fmt.Errorf("dataset %s: %w", shapes.Name, err)
		}
		if r.mixed {
			if _, err := fd.WriteAt(rankRows[:8*m], ranks.Offset+8*int64(i)); err != nil {
				return fmt.Errorf("dataset %s: %w", ranks.Name, err)
			}
		}
	}
	if _, err := src.ReadByte(); err != io.EOF {
		return fmt.Errorf("dataset %s: more recorded than %d shapes", shapes.Name, n)
	}
	if total != r.elems {
		return fmt.Errorf("dataset %s: %d elements recorded, %d laid out", offsets.Name, total, r.elems)
	}
	return nil
}

// shapeOf returns sample i's shape in dims: the column's first shape for
// the samples before it turned ragged, else the next record from src.
func (c *column) shapeOf(i int, src byteReader, dims []int64) ([]int64, error) {
	dims = dims[:0]
	if i < c.rag.lead {
		for _, d := range c.shape {
			dims = append(dims, int64(d))
		}
		return dims, nil
	}
	rank, err := binary.ReadUvarint(src)
	if err != nil {
		return dims, fmt.Errorf("shape %d of %d: %w", i, c.n, err)
	}
	if rank > uint64(c.rag.rank) {
		return dims, fmt.Errorf("shape %d of %d: rank %d, more than the largest %d", i, c.n, rank, c.rag.rank)
	}
	for range rank {
		d, err := binary.ReadUvarint(src)
		if err != nil {
			return dims, fmt.Errorf("shape %d of %d: %w", i, c.n, err)
		}
		dims = append(dims, int64(d))
	}
	return dims, nil
}

// laidOut returns dataset name of infos, which must hold rows int64s.
func laidOut(infos []formats.DatasetInfo, name string, rows int64) (formats.DatasetInfo, error) {
	info, ok := datasetNamed(infos, name)
	if want := 8 * rows; !ok || info.Size != want {
		return info, fmt.Errorf("dataset %s: laid out for %d bytes, want %d", name, info.Size, want)
	}
	return info, nil
}

// release removes the scratch file and drops the records.
func (r *shapeLog) release() {
	r.recs.release()
	*r = shapeLog{}
}
