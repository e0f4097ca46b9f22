// phuff.h: prep's entropy decoder for progressive JPEGs, installed into
// libjpeg-turbo in place of its own (jdphuff.c) through the module interface
// of jpegint.h. Included by turbo.go's preamble only.
//
// Why: on real photos libjpeg's progressive Huffman decoding is a quarter of
// a convert's CPU, most of it in AC refinement scans, which it decodes a
// coefficient at a time with a branch and a bit read each. Here a block's
// already-nonzero coefficients are a 64-bit mask in zigzag order: a run of
// zeros is found by counting bits, and the correction bits of the nonzero
// coefficients it passes are read at once. The coefficients are those of
// libjpeg's decoder for any well-formed stream (TestEntropySameCoefficients,
// FuzzProgressive). It warns as libjpeg does (zero bits after a marker, the
// "insufficient data" rule, bad codes, data left over before a marker), and
// turbo.go then has libjpeg decode the file again: a damaged file comes out
// exactly as libjpeg makes it (TestProgressiveDamaged).
//
// Written from ITU T.81 Annex G and libjpeg's documented module interface
// (structure.txt): start_pass, decode_mcu, insufficient_data.

// jpegint.h comes through turbo.go's preamble (JPEG_INTERNALS before
// jpeglib.h), which includes this file only where its layout is tested.
#include <limits.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// prep_zz holds the natural (row-major) position of each zigzag index; the
// 16 entries past 63 catch a damaged stream's runs past the band, as
// libjpeg's table does.
static const int prep_zz[64 + 16] = {
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

// prep_nz_zig[b][v]: the zigzag-order mask of the nonzero coefficients
// whose natural positions 8b..8b+7 are the set bits of v.
static uint64_t prep_nz_zig[8][256];

__attribute__((constructor)) static void prep_phuff_tables(void) {
	int zig_of[64];
	for (int k = 0; k < 64; k++) {
		zig_of[prep_zz[k]] = k;
	}
	for (int b = 0; b < 8; b++) {
		for (int v = 0; v < 256; v++) {
			uint64_t m = 0;
			for (int j = 0; j < 8; j++) {
				if (v & (1 << j)) {
					m |= (uint64_t)1 << zig_of[8 * b + j];
				}
			}
			prep_nz_zig[b][v] = m;
		}
	}
}

// prep_nonzero returns the zigzag-order mask of blk's nonzero coefficients.
static inline uint64_t prep_nonzero(const JCOEF *blk) {
	uint64_t nat;
#if defined(__SSE2__)
	const __m128i z = _mm_setzero_si128();
	uint64_t zero = 0;
	for (int i = 0; i < 4; i++) {
		__m128i a = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(blk + 16 * i)), z);
		__m128i b = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(blk + 16 * i + 8)), z);
		zero |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_packs_epi16(a, b)) << (16 * i);
	}
	nat = ~zero;
#else
	nat = 0;
	for (int i = 0; i < 64; i++) {
		nat |= (uint64_t)(blk[i] != 0) << i;
	}
#endif
	uint64_t m = 0;
	for (int b = 0; b < 8; b++) {
		m |= prep_nz_zig[b][(nat >> (8 * b)) & 255];
	}
	return m;
}

enum { prep_fast_bits = 10 };

// prep_prefetch asks for the coefficients of the block `ahead` blocks
// after blk, which the scan reaches a few MCUs on: each scan walks the
// image's whole coefficient buffer (31 MB for a 4000x2600 photo), and a
// DC refinement scan, which reads and writes one coefficient a block,
// spent nine tenths of its time waiting for them. The blocks of a row lie
// one after another; past the row's end the hint is only wasted.
static inline void prep_prefetch(JBLOCKROW blk, int ahead) {
	__builtin_prefetch(blk + ahead, 1);
	__builtin_prefetch((const char *)(blk + ahead) + 64, 1);
}

// prep_extend is T.81's EXTEND: the value of s bits v.
static inline int prep_extend(unsigned int v, int s) {
	return v < (1U << (s - 1)) ? (int)v + (int)(((unsigned)-1 << s) + 1) : (int)v;
}


// prep_htab is a Huffman table for decoding: prefixes of up to
// prep_fast_bits bits look up (length << 8 | symbol), 0 when longer;
// longer codes are found as in T.81 F.2.2.3 (maxcode, valoffset). fold
// looks up a symbol together with the s bits of value that follow it, when
// both fit in the prefix: total length | r << 8 | s << 12 | value << 16,
// the value extended (prep_extend); 0 when they do not fit.
typedef struct {
	uint16_t fast[1 << prep_fast_bits];
	int32_t fold[1 << prep_fast_bits];
	int32_t maxcode[18];
	int32_t valoffset[18];
	uint8_t huffval[256];
} prep_htab;

// prep_make_htab builds the decoding table for Huffman table tblno with
// libjpeg's checks (jpeg_make_d_derived_tbl), so a table libjpeg refuses
// fails here with the same error.
static void prep_make_htab(j_decompress_ptr cinfo, boolean dc, int tblno, prep_htab **out) {
	if (tblno < 0 || tblno >= NUM_HUFF_TBLS) {
		ERREXIT1(cinfo, JERR_NO_HUFF_TABLE, tblno);
	}
	JHUFF_TBL *h = dc ? cinfo->dc_huff_tbl_ptrs[tblno] : cinfo->ac_huff_tbl_ptrs[tblno];
	if (h == NULL) {
		ERREXIT1(cinfo, JERR_NO_HUFF_TABLE, tblno);
	}
	if (*out == NULL) {
		*out = (prep_htab *)(*cinfo->mem->alloc_small)((j_common_ptr)cinfo, JPOOL_IMAGE, sizeof(prep_htab));
	}
	prep_htab *t = *out;
	char size[257];
	unsigned int code[257];
	int p = 0;
	for (int l = 1; l <= 16; l++) {
		int n = (int)h->bits[l];
		if (n < 0 || p + n > 256) {
			ERREXIT(cinfo, JERR_BAD_HUFF_TABLE);
		}
		while (n--) {
			size[p++] = (char)l;
		}
	}
	size[p] = 0;
	int nsym = p;
	unsigned int c = 0;
	int si = size[0];
	p = 0;
	while (size[p]) {
		while ((int)size[p] == si) {
			code[p++] = c++;
		}
		if ((long)c >= (1L << si)) {
			ERREXIT(cinfo, JERR_BAD_HUFF_TABLE);
		}
		c <<= 1;
		si++;
	}
	p = 0;
	for (int l = 1; l <= 16; l++) {
		if (h->bits[l]) {
			t->valoffset[l] = p - (int32_t)code[p];
			p += h->bits[l];
			t->maxcode[l] = (int32_t)code[p - 1];
		} else {
			t->maxcode[l] = -1;
		}
	}
	t->valoffset[17] = 0;
	t->maxcode[17] = 0xFFFFF;
	memcpy(t->huffval, h->huffval, sizeof t->huffval);
	memset(t->fast, 0, sizeof t->fast);
	for (p = 0; p < nsym; p++) {
		int l = size[p];
		if (l > prep_fast_bits) {
			break;
		}
		int first = (int)code[p] << (prep_fast_bits - l);
		for (int i = 0; i < 1 << (prep_fast_bits - l); i++) {
			t->fast[first + i] = (uint16_t)(l << 8 | h->huffval[p]);
		}
	}
	for (int i = 0; i < 1 << prep_fast_bits; i++) {
		int f = t->fast[i], l = f >> 8, r = (f >> 4) & 15, sz = f & 15;
		if (f == 0 || l + sz > prep_fast_bits) {
			t->fold[i] = 0;
			continue;
		}
		int v = 0;
		if (sz) {
			v = prep_extend((unsigned int)(i >> (prep_fast_bits - l - sz)) & ((1U << sz) - 1), sz);
		}
		t->fold[i] = (int32_t)((unsigned int)(l + sz) | (unsigned int)r << 8 | (unsigned int)sz << 12 | (unsigned int)v << 16);
	}
	if (dc) {
		for (int i = 0; i < nsym; i++) {
			if (h->huffval[i] > 15) {
				ERREXIT(cinfo, JERR_BAD_HUFF_TABLE);
			}
		}
	}
}

typedef struct prep_phuff prep_phuff;

// prep_row_fn decodes a row of n MCUs of a scan of one component, single
// blocks (prep_consume).
typedef void (*prep_row_fn)(j_decompress_ptr cinfo, prep_phuff *e, JBLOCKROW row, JDIMENSION n);

struct prep_phuff {
	struct jpeg_entropy_decoder pub;
	// The bit reader: n bits at the top of buf, of which the last fill are
	// zeros put in after a marker (libjpeg's, once its data runs out).
	uint64_t buf;
	int n, fill;
	const JOCTET *next;
	size_t left;
	unsigned int eobrun;
	int last_dc[MAX_COMPS_IN_SCAN];
	unsigned int restarts_to_go;
	prep_htab *tabs[2][NUM_HUFF_TBLS]; // [0] DC, [1] AC
	prep_htab *ac;
	// Sequential scans (shuff.h): each block's tables, and whether its DC
	// (1) or all its coefficients (2) are stored.
	const prep_htab *dcb[D_MAX_BLOCKS_IN_MCU], *acb[D_MAX_BLOCKS_IN_MCU];
	unsigned char need[D_MAX_BLOCKS_IN_MCU];
	// The scan's row decoder for prep_consume, when it is of one
	// component; NULL: a DC scan (dc), or an interleaved sequential one,
	// which goes to decode_mcu an MCU at a time.
	prep_row_fn row;
	// dc: whether the scan is a progressive DC scan, which prep_dc_row
	// decodes a row of MCUs at a time, interleaved or not.
	boolean dc;
};

static void prep_load(j_decompress_ptr cinfo, prep_phuff *e) {
	e->next = cinfo->src->next_input_byte;
	e->left = cinfo->src->bytes_in_buffer;
}

static void prep_save(j_decompress_ptr cinfo, prep_phuff *e) {
	cinfo->src->next_input_byte = e->next;
	cinfo->src->bytes_in_buffer = e->left;
}

static int prep_byte(j_decompress_ptr cinfo, prep_phuff *e) {
	if (e->left == 0) {
		prep_save(cinfo, e);
		if (!(*cinfo->src->fill_input_buffer)(cinfo)) {
			ERREXIT(cinfo, JERR_CANT_SUSPEND);
		}
		prep_load(cinfo, e);
	}
	e->left--;
	return *e->next++;
}

// prep_refill_slow tops the reader up to at least 57 bits a byte at a
// time: 0xFF 00 as 0xFF, and zeros from a marker on (the marker is left in
// cinfo->unread_marker for libjpeg's marker reader, as libjpeg does).
static void prep_refill_slow(j_decompress_ptr cinfo, prep_phuff *e) {
	while (e->n <= 56) {
		if (cinfo->unread_marker != 0) {
			e->fill += 64 - e->n;
			e->n = 64;
			return;
		}
		int c = prep_byte(cinfo, e);
		if (c == 0xFF) {
			int c2;
			do {
				c2 = prep_byte(cinfo, e);
			} while (c2 == 0xFF);
			if (c2 != 0) {
				cinfo->unread_marker = c2;
				continue;
			}
		}
		e->buf |= (uint64_t)c << (56 - e->n);
		e->n += 8;
	}
}

// prep_fill8 tops the bit buffer buf, holding n bits, up with whole bytes
// of e's source read eight at once, when none of them is 0xFF (stuffing or
// a marker) nor a marker was met, and reports whether it could.
static inline int prep_fill8(j_decompress_ptr cinfo, prep_phuff *e, uint64_t *buf, int *n) {
	if (e->left < 8 || cinfo->unread_marker != 0) {
		return 0;
	}
	uint64_t w;
	memcpy(&w, e->next, 8);
	w = __builtin_bswap64(w);
	uint64_t t = ~w;
	if (((t - 0x0101010101010101ULL) & ~t & 0x8080808080808080ULL) != 0) {
		return 0;
	}
	int k = (64 - *n) >> 3; // whole bytes that fit: 1..8
	int nn = *n + 8 * k;
	uint64_t add = w >> *n;
	if (nn < 64) {
		add &= ~(~(uint64_t)0 >> nn);
	}
	*buf |= add;
	*n = nn;
	e->next += k;
	e->left -= (size_t)k;
	return 1;
}

// prep_need makes sure of n (≤ 57) bits.
static inline void prep_need(j_decompress_ptr cinfo, prep_phuff *e, int n) {
	if (__builtin_expect(e->n >= n, 1) || prep_fill8(cinfo, e, &e->buf, &e->n)) {
		return;
	}
	prep_refill_slow(cinfo, e);
}

// prep_bits takes n (1..32) bits; the caller has made sure of them.
static inline unsigned int prep_bits(prep_phuff *e, int n) {
	unsigned int v = (unsigned int)(e->buf >> (64 - n));
	e->buf <<= n;
	e->n -= n;
	return v;
}

// prep_huff decodes one symbol. A code longer than 16 bits is libjpeg's
// "bad Huffman code": a warning, 17 bits taken and symbol 0.
static inline int prep_huff(j_decompress_ptr cinfo, prep_phuff *e, const prep_htab *t) {
	prep_need(cinfo, e, 17);
	unsigned int f = t->fast[e->buf >> (64 - prep_fast_bits)];
	if (f != 0) {
		prep_bits(e, (int)(f >> 8));
		return (int)(f & 255);
	}
	unsigned int p = (unsigned int)(e->buf >> (64 - 16));
	for (int l = prep_fast_bits + 1; l <= 16; l++) {
		int32_t code = (int32_t)(p >> (16 - l));
		if (code <= t->maxcode[l]) {
			prep_bits(e, l);
			return t->huffval[(code + t->valoffset[l]) & 255];
		}
	}
	prep_bits(e, 17);
	WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
	return 0;
}

// prep_mcu_end notes, as libjpeg does, whether the MCU read zeros past the
// data; the rest of the data segment is then not decoded.
static inline void prep_mcu_end(j_decompress_ptr cinfo, prep_phuff *e) {
	if (e->n < e->fill) {
		e->fill = e->n;
		if (!e->pub.insufficient_data) {
			WARNMS(cinfo, JWRN_HIT_MARKER);
			e->pub.insufficient_data = TRUE;
		}
	}
}

// prep_leftover warns when a data segment ends with whole bytes of data
// its MCUs did not use (a clean stream leaves under 8 padding bits). libjpeg
// counts those bytes too, but reads ahead less than prep's bit reader, so
// whether and where it warns depends on how far it had read: prep's
// decoder gives up on such a stream instead (turbo.go's prep_give_up).
static void prep_leftover(j_decompress_ptr cinfo, prep_phuff *e) {
	if (e->n - e->fill >= 8) {
		WARNMS2(cinfo, JWRN_EXTRANEOUS_DATA, (e->n - e->fill) / 8, cinfo->unread_marker);
	}
}

static void prep_restart(j_decompress_ptr cinfo, prep_phuff *e) {
	prep_leftover(cinfo, e);
	cinfo->marker->discarded_bytes += (unsigned int)(e->n - e->fill) / 8;
	e->buf = 0;
	e->n = 0;
	e->fill = 0;
	prep_save(cinfo, e);
	if (!(*cinfo->marker->read_restart_marker)(cinfo)) {
		ERREXIT(cinfo, JERR_CANT_SUSPEND);
	}
	prep_load(cinfo, e);
	for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
		e->last_dc[ci] = 0;
	}
	e->eobrun = 0;
	e->restarts_to_go = cinfo->restart_interval;
	if (cinfo->unread_marker == 0) {
		e->pub.insufficient_data = FALSE;
	}
}

// prep_mcu_start handles a restart marker due before this MCU and loads
// the source position.
static inline void prep_mcu_start(j_decompress_ptr cinfo, prep_phuff *e) {
	prep_load(cinfo, e);
	if (cinfo->restart_interval && e->restarts_to_go == 0) {
		prep_restart(cinfo, e);
	}
}

static inline void prep_mcu_done(j_decompress_ptr cinfo, prep_phuff *e) {
	prep_save(cinfo, e);
	e->restarts_to_go--;
}

// prep_br is a copy of prep_phuff's bit buffer in local variables, which
// the compiler keeps in registers through a row of blocks (prep_row_fn):
// through e every symbol stored the buffer and loaded it back. The source
// position, needed once every few symbols, stays in e, and the slow paths
// (a marker or 0xFF byte ahead, codes over prep_fast_bits, warnings) work
// on e.
typedef struct {
	uint64_t buf;
	int n;
} prep_br;

static inline void prep_br_out(prep_phuff *e, const prep_br *br) {
	e->buf = br->buf;
	e->n = br->n;
}

static inline void prep_br_in(prep_br *br, const prep_phuff *e) {
	br->buf = e->buf;
	br->n = e->n;
}

// prep_br_need makes sure of 32 bits (prep_need's rule).
static inline void prep_br_need(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br) {
	if (__builtin_expect(br->n >= 32, 1) || prep_fill8(cinfo, e, &br->buf, &br->n)) {
		return;
	}
	prep_br_out(e, br);
	prep_refill_slow(cinfo, e);
	prep_br_in(br, e);
}

static inline unsigned int prep_br_bits(prep_br *br, int n) {
	unsigned int v = (unsigned int)(br->buf >> (64 - n));
	br->buf <<= n;
	br->n -= n;
	return v;
}

// prep_br_sym decodes a symbol and its value bits (T.81's RECEIVE and
// EXTEND) with 32 bits in hand: the symbol's run in *r, size in *s, the
// value returned.
static inline int prep_br_sym(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br, const prep_htab *t, int *r, int *s) {
	unsigned int top = (unsigned int)(br->buf >> (64 - prep_fast_bits));
	int32_t f = t->fold[top];
	if (__builtin_expect(f != 0, 1)) {
		prep_br_bits(br, f & 255);
		*r = (f >> 8) & 15;
		*s = (f >> 12) & 15;
		return f >> 16;
	}
	int sym;
	unsigned int fast = t->fast[top];
	if (fast != 0) {
		prep_br_bits(br, (int)(fast >> 8));
		sym = (int)(fast & 255);
	} else {
		prep_br_out(e, br);
		sym = prep_huff(cinfo, e, t);
		prep_br_in(br, e);
		prep_br_need(cinfo, e, br);
	}
	*r = sym >> 4;
	*s = sym & 15;
	// A code of up to prep_fast_bits bits and 15 value bits fit in the 32.
	return *s ? prep_extend(prep_br_bits(br, *s), *s) : 0;
}

// prep_br_get takes n (0..32) bits.
static inline unsigned int prep_br_get(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br, int n) {
	if (n == 0) {
		return 0;
	}
	prep_br_need(cinfo, e, br);
	return prep_br_bits(br, n);
}

// prep_br_mcu_end is prep_mcu_end for a reader in hand.
static inline void prep_br_mcu_end(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br) {
	if (br->n < e->fill) {
		prep_br_out(e, br);
		prep_mcu_end(cinfo, e);
	}
}

// prep_dc_row decodes MCU row y of a progressive DC scan (first or
// refinement, of one or more components) into buffer, the iMCU row of
// each component in the scan, as libjpeg's decode_mcu would an MCU at a
// time: a DC scan has a few bits a block, and the calls and block
// pointers of decode_mcu cost more than decoding them.
static void prep_dc_row(j_decompress_ptr cinfo, prep_phuff *e, JBLOCKARRAY *buffer, int y) {
	const prep_htab *tabs[MAX_COMPS_IN_SCAN];
	for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
		tabs[ci] = e->tabs[0][cinfo->cur_comp_info[ci]->dc_tbl_no];
	}
	boolean first = cinfo->Ah == 0;
	int al = cinfo->Al, nb = cinfo->blocks_in_MCU;
	prep_load(cinfo, e);
	prep_br br;
	prep_br_in(&br, e);
	for (JDIMENSION col = 0; col < cinfo->MCUs_per_row; col++) {
		if (cinfo->restart_interval && e->restarts_to_go == 0) {
			prep_br_out(e, &br);
			prep_restart(cinfo, e);
			prep_br_in(&br, e);
		}
		// Like libjpeg, a refinement scan decodes whether data ran out or
		// not: zeros change nothing.
		if (first && e->pub.insufficient_data) {
			e->restarts_to_go--;
			continue;
		}
		// The refinement bits of the MCU's blocks, at the top.
		unsigned int bits = first ? 0 : prep_br_get(cinfo, e, &br, nb) << (32 - nb);
		for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
			jpeg_component_info *comp = cinfo->cur_comp_info[ci];
			for (int yi = 0; yi < comp->MCU_height; yi++) {
				JBLOCKROW p = buffer[ci][yi + y] + col * (JDIMENSION)comp->MCU_width;
				for (int xi = 0; xi < comp->MCU_width; xi++) {
					prep_prefetch(p + xi, 8);
					if (!first) {
						if (bits & 0x80000000U) {
							p[xi][0] |= (JCOEF)(1 << al);
						}
						bits <<= 1;
						continue;
					}
					prep_br_need(cinfo, e, &br);
					int r, sz;
					int s = prep_br_sym(cinfo, e, &br, tabs[ci], &r, &sz);
					int last = e->last_dc[ci];
					if ((last >= 0 && s > INT_MAX - last) || (last < 0 && s < INT_MIN - last)) {
						ERREXIT(cinfo, JERR_BAD_DCT_COEF);
					}
					s += last;
					e->last_dc[ci] = s;
					p[xi][0] = (JCOEF)(int)((unsigned int)s << al);
				}
			}
		}
		prep_br_mcu_end(cinfo, e, &br);
		e->restarts_to_go--;
	}
	prep_br_out(e, &br);
	prep_save(cinfo, e);
}

// PREP_ROW defines name, the row decoder (prep_row_fn) of a scan of one
// component from block, its decoder of one block: each block as libjpeg's
// decode_mcu would, without a call, nor a load and store of the source
// position and bit buffer, a block.
#define PREP_ROW(attr, name, block) \
	attr static void name(j_decompress_ptr cinfo, prep_phuff *e, JBLOCKROW row, JDIMENSION n) { \
		prep_load(cinfo, e); \
		prep_br br; \
		prep_br_in(&br, e); \
		for (JDIMENSION i = 0; i < n; i++) { \
			prep_prefetch(row + i, 4); \
			if (cinfo->restart_interval && e->restarts_to_go == 0) { \
				prep_br_out(e, &br); \
				prep_restart(cinfo, e); \
				prep_br_in(&br, e); \
			} \
			if (!e->pub.insufficient_data) { \
				block(cinfo, e, &br, row[i]); \
			} \
			e->restarts_to_go--; \
		} \
		prep_br_out(e, &br); \
		prep_save(cinfo, e); \
	}

__attribute__((always_inline)) static inline void prep_ac_first_block(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br, JCOEF *blk) {
	if (e->eobrun > 0) {
		e->eobrun--;
		return;
	}
	const prep_htab *t = e->ac;
	int se = cinfo->Se, al = cinfo->Al;
	for (int k = cinfo->Ss; k <= se; k++) {
		prep_br_need(cinfo, e, br);
		int r, s;
		int v = prep_br_sym(cinfo, e, br, t, &r, &s);
		if (s) {
			k += r;
			blk[prep_zz[k]] = (JCOEF)(int)((unsigned int)v << al);
			continue;
		}
		if (r == 15) {
			k += 15;
			continue;
		}
		// EOBRUN: 2^r blocks and r more bits' worth end here; a code of
		// up to 16 bits and 14 bits fit in the 32 in hand.
		unsigned int run = 1U << r;
		if (r) {
			run += prep_br_bits(br, r);
		}
		e->eobrun = run - 1;
		break;
	}
	prep_br_mcu_end(cinfo, e, br);
}

PREP_ROW(, prep_ac_first_row, prep_ac_first_block)

// prep_correct appends a correction bit to each coefficient of blk whose
// zigzag index is in mask, in zigzag order, taking the bits from the top
// of bits: a 1 adds p1 to its magnitude unless that bit is set already.
// Branch-free: the bits are data, half of them ones.
static inline void prep_correct(JCOEF *blk, uint64_t mask, uint64_t bits, int p1) {
	while (mask) {
		int k = __builtin_ctzll(mask);
		mask &= mask - 1;
		JCOEF *c = blk + prep_zz[k];
		int v = *c;
		int add = (int)(bits >> 63) & ((v & p1) == 0);
		int neg = v >> 31;            // -1 or 0
		int delta = (p1 ^ neg) - neg; // p1 or -p1
		*c = (JCOEF)(v + (delta & -add));
		bits <<= 1;
	}
}

// prep_corrections reads the n correction bits of the coefficients in mask
// and appends them. Reading first keeps the next symbol's decoding off the
// corrections' path.
__attribute__((always_inline)) static inline void prep_corrections(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br, JCOEF *blk, uint64_t mask, int n, int p1) {
	while (n > 32) {
		// Up to 63 nonzero coefficients: 32 at a time.
		uint64_t first = mask;
		for (int i = 0; i < 32; i++) {
			mask &= mask - 1;
		}
		prep_br_need(cinfo, e, br);
		prep_correct(blk, first & ~mask, (uint64_t)prep_br_bits(br, 32) << 32, p1);
		n -= 32;
	}
	if (n > 0) {
		prep_br_need(cinfo, e, br);
		uint64_t bits = (uint64_t)prep_br_bits(br, n) << (64 - n);
		if (bits) {
			prep_correct(blk, mask, bits, p1);
		}
	}
}

// prep_popcount counts x's set bits without the POPCNT instruction, which
// x86-64's baseline lacks (the compiler would call libgcc).
static inline int prep_popcount(uint64_t x) {
	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
	return (int)((x * 0x0101010101010101ULL) >> 56);
}

static uint8_t prep_select[256][8];

__attribute__((constructor)) static void prep_select_table(void) {
	for (int v = 0; v < 256; v++) {
		int n = 0;
		for (int j = 0; j < 8; j++) {
			if (v & (1 << j)) {
				prep_select[v][n++] = (uint8_t)j;
			}
		}
	}
}

// prep_nth returns the index of the set bit of x with r set bits below it
// (0 ≤ r < 64), or 64 when x has r or fewer set bits: bytes' bit counts
// and their running sums side by side in one word, then a table for the
// byte found.
static inline int prep_nth(uint64_t x, int r) {
	uint64_t c = x - ((x >> 1) & 0x5555555555555555ULL);
	c = (c & 0x3333333333333333ULL) + ((c >> 2) & 0x3333333333333333ULL);
	c = (c + (c >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
	uint64_t sums = c * 0x0101010101010101ULL; // byte i: set bits in bytes 0..i
	uint64_t ge = ((sums | 0x8080808080808080ULL) - (uint64_t)(r + 1) * 0x0101010101010101ULL) & 0x8080808080808080ULL;
	if (ge == 0) {
		return 64;
	}
	int byte = __builtin_ctzll(ge) >> 3;
	int below = (int)(((sums << 8) >> (8 * byte)) & 255);
	return 8 * byte + prep_select[(x >> (8 * byte)) & 255][r - below];
}

#define PREP_REFINE_BLOCK prep_ac_refine_block
#define PREP_REFINE_ROW prep_ac_refine_row
#define PREP_REFINE_ATTR
#define PREP_NTH prep_nth
#define PREP_POPCOUNT prep_popcount
#include "phuff_refine.h"
#undef PREP_REFINE_BLOCK
#undef PREP_REFINE_ROW
#undef PREP_REFINE_ATTR
#undef PREP_NTH
#undef PREP_POPCOUNT

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

// prep_nth_bmi2 is prep_nth in one instruction where BMI2's PDEP is fast.
__attribute__((target("bmi2,popcnt"))) static inline int prep_nth_bmi2(uint64_t x, int r) {
	uint64_t b = _pdep_u64((uint64_t)1 << r, x);
	return b ? __builtin_ctzll(b) : 64;
}

#define PREP_REFINE_BLOCK prep_ac_refine_bmi2_block
#define PREP_REFINE_ROW prep_ac_refine_bmi2_row
#define PREP_REFINE_ATTR __attribute__((target("bmi2,popcnt")))
#define PREP_NTH prep_nth_bmi2
#define PREP_POPCOUNT __builtin_popcountll
#include "phuff_refine.h"
#undef PREP_REFINE_BLOCK
#undef PREP_REFINE_ROW
#undef PREP_REFINE_ATTR
#undef PREP_NTH
#undef PREP_POPCOUNT

// prep_fast_pdep reports whether this CPU has a fast PDEP: Intel's since
// Haswell, AMD's since Zen 3 (family 0x19), all with POPCNT; Zen 1 and 2 (and Hygon) run
// it in microcode, slower than prep_nth.
static int prep_fast_pdep(void) {
	unsigned int a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1U << 8))) {
		return 0; // no BMI2
	}
	if (!__get_cpuid(0, &a, &b, &c, &d)) {
		return 0;
	}
	char vendor[13];
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = 0;
	if (strcmp(vendor, "GenuineIntel") == 0) {
		return 1;
	}
	if (strcmp(vendor, "AuthenticAMD") != 0 || !__get_cpuid(1, &a, &b, &c, &d)) {
		return 0;
	}
	unsigned int family = (a >> 8) & 15;
	if (family == 15) {
		family += (a >> 20) & 255;
	}
	return family >= 0x19;
}
#else
static int prep_fast_pdep(void) { return 0; }
#define prep_ac_refine_bmi2_row prep_ac_refine_row
#endif

// prep_use_pdep picks the refinement decoder; the tests set it to check
// both against libjpeg.
static int prep_use_pdep;

__attribute__((constructor)) static void prep_pick_refine(void) {
	prep_use_pdep = prep_fast_pdep();
}

static int prep_set_pdep(int on) {
	int was = prep_use_pdep;
	prep_use_pdep = on;
	return was;
}

// prep_no_mcu is a progressive scan's decode_mcu. libjpeg calls it only
// from consume_data, which prep_consume replaces, so never; were it
// called, the error makes turbo.go have libjpeg decode the file again.
static boolean prep_no_mcu(j_decompress_ptr cinfo, JBLOCKROW *mcu) {
	(void)mcu;
	ERREXIT(cinfo, JERR_NOT_COMPILED);
	return FALSE;
}

// prep_scan readies e for the scan libjpeg has just read the header of;
// check also validates it and records its progression, as libjpeg's
// start_pass does.
static void prep_scan(j_decompress_ptr cinfo, prep_phuff *e, boolean check) {
	prep_leftover(cinfo, e); // of the scan before
	boolean dc = cinfo->Ss == 0;
	if (check) {
		boolean bad = FALSE;
		if (dc) {
			bad = cinfo->Se != 0;
		} else {
			bad = cinfo->Ss > cinfo->Se || cinfo->Se >= DCTSIZE2 || cinfo->comps_in_scan != 1;
		}
		if (cinfo->Ah != 0 && cinfo->Al != cinfo->Ah - 1) {
			bad = TRUE;
		}
		if (cinfo->Al > 13) {
			bad = TRUE;
		}
		if (bad) {
			ERREXIT4(cinfo, JERR_BAD_PROGRESSION, cinfo->Ss, cinfo->Se, cinfo->Ah, cinfo->Al);
		}
		for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
			int c = cinfo->cur_comp_info[ci]->component_index;
			int *bits = &cinfo->coef_bits[c][0];
			if (!dc && bits[0] < 0) {
				WARNMS2(cinfo, JWRN_BOGUS_PROGRESSION, c, 0);
			}
			for (int k = cinfo->Ss; k <= cinfo->Se; k++) {
				int expected = bits[k] < 0 ? 0 : bits[k];
				if (cinfo->Ah != expected) {
					WARNMS2(cinfo, JWRN_BOGUS_PROGRESSION, c, k);
				}
				bits[k] = cinfo->Al;
			}
		}
	}
	// prep_consume decodes every scan: DC scans with prep_dc_row, AC ones
	// (one component each) with a row decoder.
	e->pub.decode_mcu = prep_no_mcu;
	e->dc = dc;
	if (dc) {
		e->row = NULL;
	} else if (cinfo->Ah == 0) {
		e->row = prep_ac_first_row;
	} else {
		e->row = prep_use_pdep ? prep_ac_refine_bmi2_row : prep_ac_refine_row;
	}
	for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
		jpeg_component_info *comp = cinfo->cur_comp_info[ci];
		if (dc) {
			if (cinfo->Ah == 0) {
				prep_make_htab(cinfo, TRUE, comp->dc_tbl_no, &e->tabs[0][comp->dc_tbl_no]);
			}
		} else {
			prep_make_htab(cinfo, FALSE, comp->ac_tbl_no, &e->tabs[1][comp->ac_tbl_no]);
			e->ac = e->tabs[1][comp->ac_tbl_no];
		}
		e->last_dc[ci] = 0;
	}
	e->buf = 0;
	e->n = 0;
	e->fill = 0;
	e->pub.insufficient_data = FALSE;
	e->eobrun = 0;
	e->restarts_to_go = cinfo->restart_interval;
}

static void prep_phuff_start_pass(j_decompress_ptr cinfo) {
	prep_scan(cinfo, (prep_phuff *)cinfo->entropy, TRUE);
}

// prep_consume is libjpeg's consume_data (jdcoefct.c), the input side of
// its coefficient controller for JPEGs of several scans, which
// prep_use_consume puts in its place: it decodes one iMCU row of the
// current scan into the whole-image coefficient arrays (coef_arrays). For
// a scan of one component, every AC scan of a progressive JPEG, it hands
// whole rows of blocks to the scan's row decoder; libjpeg calls
// decode_mcu a block at a time, and that call, with the pointers it
// gathers for it, took a tenth of a progressive decode's time.
static int prep_consume(j_decompress_ptr cinfo) {
	prep_phuff *e = (prep_phuff *)cinfo->entropy;
	JBLOCKARRAY buffer[MAX_COMPS_IN_SCAN];
	for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
		jpeg_component_info *comp = cinfo->cur_comp_info[ci];
		buffer[ci] = (*cinfo->mem->access_virt_barray)((j_common_ptr)cinfo,
			cinfo->coef->coef_arrays[comp->component_index],
			cinfo->input_iMCU_row * (JDIMENSION)comp->v_samp_factor, (JDIMENSION)comp->v_samp_factor, TRUE);
	}
	// An iMCU row holds one MCU row of an interleaved scan, v_samp_factor
	// block rows of a single component's, fewer at the bottom.
	int rows = 1;
	if (cinfo->comps_in_scan == 1) {
		jpeg_component_info *comp = cinfo->cur_comp_info[0];
		rows = cinfo->input_iMCU_row < cinfo->total_iMCU_rows - 1 ? comp->v_samp_factor : comp->last_row_height;
	}
	for (int y = 0; y < rows; y++) {
		if (e->dc) {
			if (!e->pub.insufficient_data) {
				cinfo->master->last_good_iMCU_row = cinfo->input_iMCU_row;
			}
			prep_dc_row(cinfo, e, buffer, y);
			continue;
		}
		if (e->row != NULL) {
			if (!e->pub.insufficient_data) {
				cinfo->master->last_good_iMCU_row = cinfo->input_iMCU_row;
			}
			e->row(cinfo, e, buffer[0][y], cinfo->MCUs_per_row);
			continue;
		}
		JBLOCKROW mcu[D_MAX_BLOCKS_IN_MCU];
		for (JDIMENSION col = 0; col < cinfo->MCUs_per_row; col++) {
			int b = 0;
			for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
				jpeg_component_info *comp = cinfo->cur_comp_info[ci];
				for (int yi = 0; yi < comp->MCU_height; yi++) {
					JBLOCKROW p = buffer[ci][yi + y] + col * (JDIMENSION)comp->MCU_width;
					for (int xi = 0; xi < comp->MCU_width; xi++) {
						mcu[b++] = p++;
					}
				}
			}
			if (!e->pub.insufficient_data) {
				cinfo->master->last_good_iMCU_row = cinfo->input_iMCU_row;
			}
			(*e->pub.decode_mcu)(cinfo, mcu);
		}
	}
	if (++cinfo->input_iMCU_row < cinfo->total_iMCU_rows) {
		return JPEG_ROW_COMPLETED;
	}
	(*cinfo->inputctl->finish_input_pass)(cinfo);
	return JPEG_SCAN_COMPLETED;
}

// prep_can_consume reports whether libjpeg reads the JPEG with
// consume_data: when it has several scans, whose coefficients it keeps for
// the whole image (always, for a progressive one).
static int prep_can_consume(j_decompress_ptr cinfo) {
	return cinfo->inputctl->has_multiple_scans && cinfo->coef->coef_arrays != NULL;
}

// prep_use_consume puts prep_consume in place of libjpeg's consume_data,
// for this scan and (start_input_pass takes it from cinfo->coef) the rest.
static void prep_use_consume(j_decompress_ptr cinfo) {
	cinfo->coef->consume_data = prep_consume;
	cinfo->inputctl->consume_input = prep_consume;
}

// prep_phuff_install replaces libjpeg's progressive entropy decoder with
// prep's, which only prep_consume calls (turbo.go's prep_install puts it
// in). It is called from the progress monitor before libjpeg reads the
// first scan's data, when libjpeg's start_pass has checked and recorded
// that scan: prep's takes over from there.
static unsigned long prep_phuff_installs; // for the tests

static unsigned long prep_phuff_count(void) {
	return __atomic_load_n(&prep_phuff_installs, __ATOMIC_RELAXED);
}

static void prep_phuff_install(j_decompress_ptr cinfo) {
	__atomic_fetch_add(&prep_phuff_installs, 1, __ATOMIC_RELAXED);
	prep_phuff *e = (prep_phuff *)(*cinfo->mem->alloc_small)((j_common_ptr)cinfo, JPOOL_IMAGE, sizeof(prep_phuff));
	memset(e, 0, sizeof *e);
	e->pub.start_pass = prep_phuff_start_pass;
	cinfo->entropy = &e->pub;
	prep_scan(cinfo, e, FALSE);
}

// prep_entropy_finish checks the end of the last scan as prep_scan and
// prep_seq_scan check the others: called once prep's decoder (either) has
// decoded every scan.
static void prep_entropy_finish(j_decompress_ptr cinfo) {
	prep_leftover(cinfo, (prep_phuff *)cinfo->entropy);
}
