//go:build !linux

package gpu

// OpenCUDA reports that prep drives CUDA on Linux only.
func OpenCUDA(index int) (Device, error) {
	return nil, noGPU("CUDA support needs Linux: libcuda.so.1 is not available on this system")
}
