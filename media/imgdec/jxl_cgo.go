//go:build cgo

package imgdec

/*
// libjxl is loaded at run time (dlopen), as libheif is (heif_cgo.go): a
// prep without it still runs and names the package for a JPEG XL file.
// Its header comes from libjxl-dev at build time; the calls used here are
// the same from 0.7 to 0.11.
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <jxl/decode.h>

enum { prep_jxl_ok = 0, prep_jxl_fail = 1, prep_jxl_short = 2, prep_jxl_size = 3 };

static struct {
	uint32_t (*version)(void);
	JxlDecoder *(*create)(const JxlMemoryManager *);
	void (*destroy)(JxlDecoder *);
	JxlDecoderStatus (*subscribe)(JxlDecoder *, int);
	JxlDecoderStatus (*set_input)(JxlDecoder *, const uint8_t *, size_t);
	void (*close_input)(JxlDecoder *);
	JxlDecoderStatus (*process)(JxlDecoder *);
	JxlDecoderStatus (*basic_info)(const JxlDecoder *, JxlBasicInfo *);
	JxlDecoderStatus (*out_size)(const JxlDecoder *, const JxlPixelFormat *, size_t *);
	JxlDecoderStatus (*set_out)(JxlDecoder *, const JxlPixelFormat *, void *, size_t);
	JxlDecoderStatus (*unpremultiply)(JxlDecoder *, JXL_BOOL);
} prep_jxl;

// prep_jxl_load binds libjxl once (under the Go side's sync.Once): 0, or
// -1 with why in msg. Debian 12 ships libjxl.so.0.7; later releases
// bumped the soname with each minor version.
static int prep_jxl_load(char *msg, size_t msglen) {
	static const char *names[] = {"libjxl.so.0.11", "libjxl.so.0.10", "libjxl.so.0.9", "libjxl.so.0.8",
	                              "libjxl.so.0.7"};
	void *h = NULL;
	for (size_t i = 0; h == NULL && i < sizeof names / sizeof names[0]; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(msg, msglen, "%s", dlerror());
		return -1;
	}
#define PREP_SYM(field, name)                                                                                  \
	if ((*(void **)&prep_jxl.field = dlsym(h, name)) == NULL) {                                            \
		snprintf(msg, msglen, "libjxl lacks %s", name);                                                \
		return -1;                                                                                     \
	}
	PREP_SYM(version, "JxlDecoderVersion")
	PREP_SYM(create, "JxlDecoderCreate")
	PREP_SYM(destroy, "JxlDecoderDestroy")
	PREP_SYM(subscribe, "JxlDecoderSubscribeEvents")
	PREP_SYM(set_input, "JxlDecoderSetInput")
	PREP_SYM(close_input, "JxlDecoderCloseInput")
	PREP_SYM(process, "JxlDecoderProcessInput")
	PREP_SYM(basic_info, "JxlDecoderGetBasicInfo")
	PREP_SYM(out_size, "JxlDecoderImageOutBufferSize")
	PREP_SYM(set_out, "JxlDecoderSetImageOutBuffer")
	PREP_SYM(unpremultiply, "JxlDecoderSetUnpremultiplyAlpha")
#undef PREP_SYM
	return 0;
}

static uint32_t prep_jxl_version(void) { return prep_jxl.version(); }

// prep_jxl_run decodes data: its size as displayed (orientation applied,
// as libjxl does by default) in *w, *h and whether it has alpha; then,
// when out is not NULL and the size is want_w x want_h, the first frame
// as 8-bit RGBA (grey repeated, alpha not premultiplied) into out, w*4
// bytes a row. An image of more than 8 bits is decoded to 16 and keeps
// the high byte, as prep does for 16-bit PNGs (libjxl's own 8-bit output
// rounds instead).
static int prep_jxl_run(const uint8_t *data, size_t size, uint8_t *out, int want_w, int want_h, int *w, int *h,
                        int *alpha, char *msg, size_t msglen) {
	JxlDecoder *d = prep_jxl.create(NULL);
	if (d == NULL) {
		snprintf(msg, msglen, "out of memory");
		return prep_jxl_fail;
	}
	int rc = prep_jxl_fail;
	JxlPixelFormat fmt = {4, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
	uint16_t *wide = NULL; // the 16-bit frame, for images of more than 8 bits
	if (prep_jxl.subscribe(d, JXL_DEC_BASIC_INFO | (out ? JXL_DEC_FULL_IMAGE : 0)) != JXL_DEC_SUCCESS ||
	    prep_jxl.unpremultiply(d, JXL_TRUE) != JXL_DEC_SUCCESS ||
	    prep_jxl.set_input(d, data, size) != JXL_DEC_SUCCESS) {
		snprintf(msg, msglen, "libjxl refused the decoder's settings");
		goto done;
	}
	prep_jxl.close_input(d);
	for (;;) {
		JxlDecoderStatus s = prep_jxl.process(d);
		if (s == JXL_DEC_BASIC_INFO) {
			JxlBasicInfo bi;
			if (prep_jxl.basic_info(d, &bi) != JXL_DEC_SUCCESS) {
				snprintf(msg, msglen, "unreadable basic info");
				goto done;
			}
			// libjxl turns the image as its orientation says (not kept)
			// and reports the size after turning, orientation 1.
			*w = (int)bi.xsize;
			*h = (int)bi.ysize;
			*alpha = bi.alpha_bits != 0;
			if (out == NULL) {
				rc = prep_jxl_ok;
				goto done;
			}
			if (*w != want_w || *h != want_h) {
				rc = prep_jxl_size;
				goto done;
			}
			if (bi.bits_per_sample > 8) fmt.data_type = JXL_TYPE_UINT16;
		} else if (s == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
			size_t need = 0, px = (size_t)want_w * want_h * 4;
			void *buf = out;
			if (fmt.data_type == JXL_TYPE_UINT16 && (buf = wide = wide ? wide : malloc(px * 2)) == NULL) {
				snprintf(msg, msglen, "out of memory");
				goto done;
			}
			if (prep_jxl.out_size(d, &fmt, &need) != JXL_DEC_SUCCESS ||
			    need != px * (fmt.data_type == JXL_TYPE_UINT16 ? 2 : 1) ||
			    prep_jxl.set_out(d, &fmt, buf, need) != JXL_DEC_SUCCESS) {
				snprintf(msg, msglen, "the frame is not the %dx%d the header declares", want_w, want_h);
				goto done;
			}
		} else if (s == JXL_DEC_FULL_IMAGE) {
			if (wide != NULL)
				for (size_t i = 0, n = (size_t)want_w * want_h * 4; i < n; i++) out[i] = (uint8_t)(wide[i] >> 8);
			rc = prep_jxl_ok; // the first frame, as for GIF and WebP
			goto done;
		} else if (s == JXL_DEC_NEED_MORE_INPUT) {
			snprintf(msg, msglen, "the data ends early");
			rc = prep_jxl_short;
			goto done;
		} else if (s == JXL_DEC_SUCCESS) {
			snprintf(msg, msglen, "no image in the file");
			goto done;
		} else {
			snprintf(msg, msglen, "libjxl refused the codestream");
			goto done;
		}
	}
done:
	prep_jxl.destroy(d);
	free(wide);
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"image"
	"runtime"
	"sync"
	"unsafe"
)

// jxlLib binds libjxl on first use: nil, or why it is missing.
var jxlLib = sync.OnceValue(func() error {
	var msg [256]C.char
	if C.prep_jxl_load(&msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("%s", C.GoString(&msg[0]))
	}
	return nil
})

// jxlRun runs prep_jxl_run over data; out nil reads the header only.
func jxlRun(data []byte, out *image.NRGBA) (w, h int, alpha bool, err error) {
	if err := jxlLib(); err != nil {
		return 0, 0, false, unsupported(fmt.Sprintf("unsupported image format (JPEG XL): libjxl is not installed (%v); install it (Debian 12: apt install libjxl0.7; Fedora: dnf install libjxl), or convert the file to PNG or JPEG first", err))
	}
	var cw, ch, ca C.int
	var msg [256]C.char
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&data[0])
	var pix *C.uint8_t
	ww, wh := 0, 0
	if out != nil {
		pin.Pin(&out.Pix[0])
		pix = (*C.uint8_t)(unsafe.Pointer(&out.Pix[0]))
		ww, wh = out.Rect.Dx(), out.Rect.Dy()
	}
	switch C.prep_jxl_run((*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), pix, C.int(ww), C.int(wh),
		&cw, &ch, &ca, &msg[0], C.size_t(len(msg))) {
	case C.prep_jxl_ok:
		return int(cw), int(ch), ca != 0, nil
	case C.prep_jxl_short:
		return 0, 0, false, errTruncated
	case C.prep_jxl_size:
		return 0, 0, false, fmt.Errorf("the image is %d×%d, not the %d×%d its header declared", cw, ch, ww, wh)
	}
	return 0, 0, false, errors.New("libjxl: " + C.GoString(&msg[0]))
}

func jxlSize(data []byte) (int, int, error) {
	w, h, _, err := jxlRun(data, nil)
	return w, h, err
}

func decodeJXL(data []byte, w, h int) (*image.NRGBA, bool, error) {
	img := newNRGBA(w, h) // rows of 4*w bytes, as libjxl writes them
	_, _, alpha, err := jxlRun(data, img)
	if err != nil {
		Release(img)
		return nil, false, err
	}
	return img, !alpha, nil
}

// JXLDecoder says what decodes JPEG XL files here (prep version).
func JXLDecoder() string {
	if err := jxlLib(); err != nil {
		return "not decoded: libjxl not found (apt install libjxl0.7), loaded at run time"
	}
	v := uint32(C.prep_jxl_version())
	return fmt.Sprintf("libjxl %d.%d.%d, loaded at run time", v/1000000, v/1000%1000, v%1000)
}
