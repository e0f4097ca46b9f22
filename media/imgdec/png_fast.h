// prep_png_fast decodes the PNGs most datasets hold (8-bit, not
// interlaced, grey, grey+alpha, RGB or RGBA, no palette or tRNS) into
// 8-bit RGBA rows, as prep_png_decode does through libpng, but inflates
// with libdeflate, about twice zlib's speed on photos (a PNG costs
// several JPEGs to decode). It takes only clean files: every chunk's CRC
// right, no critical chunk but IHDR, IDAT and IEND, the IDATs one run, the
// zlib stream (its Adler-32 checked) exactly the image's filtered rows.
// Anything else returns prep_png_other and libpng decides, as before.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>

enum { prep_png_other = 2 };

static uint32_t prep_be32(const unsigned char *p) {
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned char prep_paeth(unsigned char a, unsigned char b, unsigned char c) {
	int p = (int)a + b - c;
	int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
	return (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
}

// prep_unfilter undoes row filter f on cur (n bytes, bpp bytes a pixel)
// given the previous unfiltered row (NULL for the first): 0, or -1 for a
// filter type PNG does not have.
static int prep_unfilter(int f, unsigned char *cur, const unsigned char *prev, size_t n, int bpp) {
	size_t x;
	switch (f) {
	case 0:
		return 0;
	case 1:
		for (x = bpp; x < n; x++) cur[x] = (unsigned char)(cur[x] + cur[x - bpp]);
		return 0;
	case 2:
		if (prev)
			for (x = 0; x < n; x++) cur[x] = (unsigned char)(cur[x] + prev[x]);
		return 0;
	case 3:
		for (x = 0; x < n; x++) {
			int a = x >= (size_t)bpp ? cur[x - bpp] : 0, b = prev ? prev[x] : 0;
			cur[x] = (unsigned char)(cur[x] + ((a + b) >> 1));
		}
		return 0;
	case 4:
		if (!prev) { // b = c = 0: Paeth is Sub
			for (x = bpp; x < n; x++) cur[x] = (unsigned char)(cur[x] + cur[x - bpp]);
			return 0;
		}
		for (x = 0; x < (size_t)bpp && x < n; x++) cur[x] = (unsigned char)(cur[x] + prev[x]);
		for (; x < n; x++) cur[x] = (unsigned char)(cur[x] + prep_paeth(cur[x - bpp], prev[x], prev[x - bpp]));
		return 0;
	}
	return -1;
}

// prep_png_fast: out holds h rows of stride bytes, w RGBA pixels each;
// scratch at least h*(1+4w) bytes (the inflated rows; the IDATs when there
// are several). 0 (prep_png_ok), or prep_png_other.
static int prep_png_fast(const unsigned char *data, size_t size, unsigned char *out, int stride, int w, int h,
                         unsigned char *scratch, size_t scratch_len) {
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	if (size < 8 || memcmp(data, sig, 8) != 0 || w <= 0 || h <= 0) return prep_png_other;
	int ctype = -1, bpp = 0, idats = 0, idat_done = 0, ended = 0;
	const unsigned char *z = NULL; // the zlib stream: in data (one IDAT) or gathered
	size_t zlen = 0;
	size_t pos = 8;
	while (pos + 12 <= size) {
		uint32_t n = prep_be32(data + pos);
		if (n > 0x7fffffffu || n > size - pos - 12) return prep_png_other;
		const unsigned char *type = data + pos + 4, *body = type + 4;
		if ((uint32_t)libdeflate_crc32(0, type, (size_t)n + 4) != prep_be32(body + n)) return prep_png_other;
		int idat = memcmp(type, "IDAT", 4) == 0;
		if (pos == 8) {
			if (memcmp(type, "IHDR", 4) != 0 || n != 13 || prep_be32(body) != (uint32_t)w ||
			    prep_be32(body + 4) != (uint32_t)h || body[8] != 8 || body[10] || body[11] || body[12])
				return prep_png_other;
			ctype = body[9];
			bpp = ctype == 0 ? 1 : ctype == 4 ? 2 : ctype == 2 ? 3 : ctype == 6 ? 4 : 0;
			if (!bpp) return prep_png_other; // palette (3): libpng
		} else if (idat) {
			if (idat_done) return prep_png_other; // IDATs apart
			if (idats++ == 0) {
				z = body;
				zlen = n;
			} else {
				if (idats == 2) { // a second IDAT: gather them at the end of scratch
					size_t left = size - pos; // all later IDATs fit in what is left of the file
					if (left + zlen > scratch_len) return prep_png_other;
					unsigned char *g = scratch + scratch_len - (left + zlen);
					memcpy(g, z, zlen);
					z = g;
				}
				memcpy((unsigned char *)z + zlen, body, n);
				zlen += n;
			}
		} else if (memcmp(type, "IEND", 4) == 0) {
			ended = 1;
			break;
		} else if (!(type[0] & 0x20) || memcmp(type, "tRNS", 4) == 0) {
			return prep_png_other; // PLTE and unknown critical chunks; transparency
		} else if (idats) {
			idat_done = 1;
		}
		pos += (size_t)n + 12;
	}
	size_t row = (size_t)w * bpp, want = (size_t)h * (row + 1);
	if (!ended || !idats || want > scratch_len) return prep_png_other;
	// The rows are inflated to the front of scratch; gathered IDATs sit at
	// its end, past the rows unless scratch is short for both.
	if (idats > 1 && z < scratch + want) return prep_png_other;
	static __thread struct libdeflate_decompressor *d;
	if (d == NULL && (d = libdeflate_alloc_decompressor()) == NULL) return prep_png_other;
	size_t in_used = 0, got = 0;
	if (libdeflate_zlib_decompress_ex(d, z, zlen, scratch, want, &in_used, &got) != LIBDEFLATE_SUCCESS ||
	    got != want || in_used != zlen)
		return prep_png_other;
	const unsigned char *prev = NULL;
	for (int y = 0; y < h; y++) {
		unsigned char *cur = scratch + (size_t)y * (row + 1);
		if (prep_unfilter(cur[0], cur + 1, prev, row, bpp)) return prep_png_other;
		prev = cur + 1;
		const unsigned char *s = cur + 1;
		unsigned char *o = out + (size_t)y * stride;
		switch (ctype) {
		case 0:
			for (int x = 0; x < w; x++, o += 4) o[0] = o[1] = o[2] = s[x], o[3] = 0xff;
			break;
		case 4:
			for (int x = 0; x < w; x++, o += 4, s += 2) o[0] = o[1] = o[2] = s[0], o[3] = s[1];
			break;
		case 2:
			for (int x = 0; x < w; x++, o += 4, s += 3) o[0] = s[0], o[1] = s[1], o[2] = s[2], o[3] = 0xff;
			break;
		default:
			memcpy(o, s, row);
		}
	}
	return 0;
}
