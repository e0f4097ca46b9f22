//go:build !cgo

package imgdec

import (
	"errors"
	"fmt"
	"image"
)

// Without cgo there is no libheif or libjxl binding: HEIF, AVIF and JPEG
// XL files are refused, naming the build.

// cDecoders says whether libheif and libjxl can be bound: the only
// decoders Isolate moves into child processes.
const cDecoders = false

// heifLib and jxlLib say why the libraries are not there.
var (
	heifLib = func() error { return errors.New("built without cgo") }
	jxlLib  = heifLib
)

func noCgo(name string) error {
	return unsupported(fmt.Sprintf("unsupported image format (%s): this prep was built without cgo; rebuild it with cgo (make install), or convert the file to PNG or JPEG first", name))
}

func heifSizeOf(name string) func([]byte) (int, int, error) {
	return func([]byte) (int, int, error) { return 0, 0, noCgo(name) }
}

func decodeHEIFOf(name string) func([]byte, int, int) (*image.NRGBA, bool, error) {
	return func([]byte, int, int) (*image.NRGBA, bool, error) { return nil, false, noCgo(name) }
}

func jxlSize([]byte) (int, int, error) { return 0, 0, noCgo("JPEG XL") }

func decodeJXL([]byte, int, int) (*image.NRGBA, bool, error) { return nil, false, noCgo("JPEG XL") }

// HEIFDecoder says what decodes HEIF and AVIF files here (prep version).
func HEIFDecoder() string { return "not decoded: built without cgo (rebuild: make install)" }

// JXLDecoder says what decodes JPEG XL files here (prep version).
func JXLDecoder() string { return "not decoded: built without cgo (rebuild: make install)" }
