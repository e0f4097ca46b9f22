//go:build !(goexperiment.simd && amd64)

package augment

// Without GOEXPERIMENT=simd, or on another architecture than amd64
// (arm64 included), the resampler runs its scalar loops only:
// resample_simd.go and resample_avx2.go have the SIMD ones.

const cpuPath = scalarPath

// cpuHas reports whether this build and CPU run the loops of path p.
func cpuHas(p simdPath) bool { return p == scalarPath }

func vRowSIMD(out, pix []byte, off, stride int, ws []int32) int { return 0 }

func hRowSIMD(out, row []byte, wt wideTaps, x0, x1 int) int { return 0 }
