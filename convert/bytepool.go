package convert

import (
	"sync"

	"github.com/prep-dev/prep/formats"
)

// bytePool keeps the tensor bytes of samples handed back through Recycle
// for the handler's next samples: fresh memory costs a page fault per 4
// KiB, which was a sixth of the video path's time.
type bytePool struct {
	mu        sync.Mutex
	free      [][]byte
	freeBytes int
}

// maxFreeBytes bounds the memory of the tensors kept for reuse. The list
// holds at most what the pipeline had in flight at once, which with
// --copies K is K samples per queued input (32 inputs × 8 copies of 224²
// RGB: 38 MB); the bound only matters for unusually large samples.
const maxFreeBytes = 256 << 20

// get returns n bytes, recycled if any held enough, of undefined content.
func (p *bytePool) get(n int) []byte {
	p.mu.Lock()
	for k := len(p.free) - 1; k >= 0; k-- {
		if cap(p.free[k]) >= n {
			data := p.free[k][:n]
			p.freeBytes -= cap(data)
			p.free[k] = p.free[len(p.free)-1]
			p.free[len(p.free)-1] = nil
			p.free = p.free[:len(p.free)-1]
			p.mu.Unlock()
			return data
		}
	}
	p.mu.Unlock()
	return make([]byte, n)
}

// recycle takes back the tensor bytes of samples, which nothing may use
// any more, and drops their fields.
func (p *bytePool) recycle(samples []formats.Sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range samples {
		for _, f := range samples[i].Fields {
			if c := cap(f.Data); c > 0 && p.freeBytes+c <= maxFreeBytes {
				p.free = append(p.free, f.Data[:0])
				p.freeBytes += c
			}
		}
		samples[i].Fields = nil
	}
}
