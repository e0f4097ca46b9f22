//go:build cgo && noprepentropy

package imgdec

// The noprepentropy build tag leaves prep's C entropy decoders (phuff.h,
// shuff.h) out, as a build against a libjpeg-turbo without a tested
// jpegint.h does: make test runs the decoder tests so too.

// #cgo CFLAGS: -DPREP_NO_ENTROPY
import "C"
