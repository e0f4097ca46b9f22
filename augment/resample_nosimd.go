//go:build !(goexperiment.simd && amd64)

package augment

// Without GOEXPERIMENT=simd on amd64 the resampler runs its scalar loops
// only (resample_simd.go has the SIMD ones).

const haveSIMD = false

var useSIMD = false

func vRowSIMD(out, pix []byte, off, stride int, ws []int32) int { return 0 }

func hRowSIMD(out, row []byte, wt wideTaps, x0, x1 int) int { return 0 }
