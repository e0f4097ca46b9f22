//go:build cgo

package imgdec

/*
// Linked statically, as libjpeg is (turbo.go): the binary runs where
// libwebp's shared objects are missing.
#cgo LDFLAGS: -l:libwebpdemux.a -l:libwebp.a -lm -pthread
#include <stdint.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>

enum { prep_webp_ok = 0, prep_webp_bad = 1, prep_webp_size = 2, prep_webp_frame = 3 };

// prep_webp_decode decodes the first frame onto the canvas with libwebp's
// animation decoder, as Pillow's WebPImagePlugin does for every WebP,
// into out (w*h*4 bytes, RGBA, not premultiplied).
static int prep_webp_decode(const uint8_t *data, size_t size, uint8_t *out, int w, int h, int *alpha) {
	WebPBitstreamFeatures f;
	if (WebPGetFeatures(data, size, &f) != VP8_STATUS_OK) {
		return prep_webp_bad;
	}
	*alpha = f.has_alpha;
	WebPData wd = {data, size};
	WebPAnimDecoderOptions opt;
	if (!WebPAnimDecoderOptionsInit(&opt)) {
		return prep_webp_bad;
	}
	opt.color_mode = MODE_RGBA;
	opt.use_threads = 0;
	WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, &opt);
	if (dec == NULL) {
		return prep_webp_bad;
	}
	WebPAnimInfo info;
	int rc = prep_webp_ok;
	uint8_t *buf;
	int ts;
	if (!WebPAnimDecoderGetInfo(dec, &info) || (int)info.canvas_width != w || (int)info.canvas_height != h) {
		rc = prep_webp_size;
	} else if (!WebPAnimDecoderGetNext(dec, &buf, &ts)) {
		rc = prep_webp_frame;
	} else {
		memcpy(out, buf, (size_t)w * h * 4);
	}
	WebPAnimDecoderDelete(dec);
	return rc;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"runtime"
	"unsafe"
)

// webpDecoderName says which WebP decoder the build has (prep version).
const webpDecoderName = "libwebp (cgo)"

func decodeWebP(data []byte, w, h int) (*image.NRGBA, bool, error) {
	img := newNRGBA(w, h)
	var alpha C.int
	var pin runtime.Pinner
	pin.Pin(&data[0])
	pin.Pin(&img.Pix[0])
	rc := C.prep_webp_decode((*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)),
		(*C.uint8_t)(unsafe.Pointer(&img.Pix[0])), C.int(w), C.int(h), &alpha)
	pin.Unpin()
	switch rc {
	case C.prep_webp_ok:
		return img, alpha == 0, nil
	case C.prep_webp_size:
		Release(img)
		return nil, false, errors.New("the canvas is not the size the header declares")
	}
	Release(img)
	if riff := int64(binary.LittleEndian.Uint32(data[4:])) + 8; riff > int64(len(data)) {
		return nil, false, fmt.Errorf("%w: the RIFF header declares %d bytes", errTruncated, riff)
	}
	return nil, false, errors.New("libwebp refused the bitstream")
}
