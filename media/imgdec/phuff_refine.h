// phuff_refine.h: the AC refinement scan decoder of phuff.h, included there
// once per way of finding the nth zero coefficient (PREP_NTH) and counting
// bits (PREP_POPCOUNT): the block decoder PREP_REFINE_BLOCK, and from it
// the row decoder PREP_REFINE_ROW, with the attributes PREP_REFINE_ATTR.

PREP_REFINE_ATTR __attribute__((always_inline)) static inline void PREP_REFINE_BLOCK(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br, JCOEF *blk) {
	int ss = cinfo->Ss, se = cinfo->Se;
	int p1 = 1 << cinfo->Al;
	int m1 = (int)((unsigned int)-1 << cinfo->Al);
	// Zigzag positions ss..se (se ≤ 63), and those of them nonzero
	// before this scan: the newly nonzero are behind k when set.
	uint64_t band = (~(uint64_t)0 >> (63 - se)) & (~(uint64_t)0 << ss);
	uint64_t nz = prep_nonzero(blk) & band;
	int k = ss;
	if (e->eobrun == 0) {
		const prep_htab *t = e->ac;
		while (k <= se) {
			prep_br_need(cinfo, e, br);
			int32_t f = t->fold[br->buf >> (64 - prep_fast_bits)];
			int r, s;
			if (f && ((f >> 12) & 15) <= 1) {
				prep_br_bits(br, f & 255);
				r = (f >> 8) & 15;
				s = (f >> 12) & 15;
				if (s) {
					s = f >> 16 > 0 ? p1 : m1;
				}
			} else {
				prep_br_out(e, br);
				s = prep_huff(cinfo, e, t);
				prep_br_in(br, e);
				r = s >> 4;
				s &= 15;
				if (s) {
					if (s != 1) {
						WARNMS(cinfo, JWRN_HUFF_BAD_CODE);
					}
					s = prep_br_get(cinfo, e, br, 1) ? p1 : m1;
				}
			}
			if (s == 0 && r != 15) {
				unsigned int run = 1U << r;
				run += prep_br_get(cinfo, e, br, r);
				e->eobrun = run;
				break;
			}
			// Pass the nonzero coefficients, correcting them, and r zero
			// ones: the target is the (r+1)th zero from k, or past the
			// band (a damaged stream) as in libjpeg. Between k and the
			// target lie r zeros and the rest nonzero.
			uint64_t ahead = band & (~(uint64_t)0 << k);
			int target = PREP_NTH(ahead & ~nz, r);
			uint64_t passed;
			int n;
			if (target < 64) {
				passed = nz & ahead & (((uint64_t)1 << target) - 1);
				n = target - k - r;
			} else {
				target = se + 1;
				passed = nz & ahead;
				n = PREP_POPCOUNT(passed);
			}
			prep_corrections(cinfo, e, br, blk, passed, n, p1);
			if (s) {
				blk[prep_zz[target]] = (JCOEF)s;
			}
			k = target + 1;
		}
	}
	if (e->eobrun > 0) {
		if (k <= se) {
			uint64_t rest = nz & (~(uint64_t)0 << k);
			prep_corrections(cinfo, e, br, blk, rest, PREP_POPCOUNT(rest), p1);
		}
		e->eobrun--;
	}
	prep_br_mcu_end(cinfo, e, br);
}

PREP_ROW(PREP_REFINE_ATTR, PREP_REFINE_ROW, PREP_REFINE_BLOCK)
