// shuff.h: prep's entropy decoder for sequential (baseline and extended
// Huffman) JPEGs, installed into libjpeg-turbo in place of its own
// (jdhuff.c) as phuff.h is for progressive ones, whose bit reader, tables
// and give-up rule it shares. Included by turbo.go's preamble after
// phuff.h.
//
// Why: libjpeg's decode_mcu was the largest single entry of a convert's
// profile on real photos (15%; 2/3 of the bench JPEGs are sequential).
// It looks a symbol up in 8 bits and then reads its value bits apart,
// refilling a byte at a time; here one 10-bit lookup gives most
// coefficients' code and value together, and the reader refills 8 bytes at
// once. Well-formed streams give libjpeg's coefficients
// (TestEntropySameCoefficients, FuzzSequential); at the first warning
// turbo.go has libjpeg decode the file again (TestEntropyDamaged).
//
// Written from ITU T.81 F.2.2 and libjpeg's documented module interface
// (structure.txt).

// prep_seq_block decodes one block's DC difference and AC coefficients
// into blk (natural order; NULL: read and dropped, as libjpeg does for a
// 1×1 inverse DCT) and returns the DC difference.
static inline int prep_seq_block(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br,
		const prep_htab *dc, const prep_htab *ac, JCOEF *blk) {
	int r, s;
	prep_br_need(cinfo, e, br);
	int diff = prep_br_sym(cinfo, e, br, dc, &r, &s);
	for (int k = 1; k < DCTSIZE2; k++) {
		prep_br_need(cinfo, e, br);
		int v = prep_br_sym(cinfo, e, br, ac, &r, &s);
		if (s) {
			// k may pass 63 in a damaged stream: prep_zz then points
			// at 63, as libjpeg's table does.
			k += r;
			if (blk) {
				blk[prep_zz[k]] = (JCOEF)v;
			}
			continue;
		}
		if (r != 15) {
			break; // EOB
		}
		k += 15; // ZRL: 16 zeros
	}
	return diff;
}

static boolean prep_seq_mcu(j_decompress_ptr cinfo, JBLOCKROW *mcu) {
	prep_phuff *e = (prep_phuff *)cinfo->entropy;
	prep_mcu_start(cinfo, e);
	if (!e->pub.insufficient_data) {
		prep_br br;
		prep_br_in(&br, e);
		for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
			JCOEF *blk = mcu != NULL && e->need[b] == 2 ? mcu[b][0] : NULL;
			int diff = prep_seq_block(cinfo, e, &br, e->dcb[b], e->acb[b], blk);
			if (e->need[b]) {
				// libjpeg adds as unsigned: a damaged stream's long run
				// of large differences wraps rather than overflows.
				int ci = cinfo->MCU_membership[b];
				int dc = (int)((unsigned int)diff + (unsigned int)e->last_dc[ci]);
				e->last_dc[ci] = dc;
				if (mcu != NULL) {
					mcu[b][0][0] = (JCOEF)dc;
				}
			}
		}
		prep_br_out(e, &br);
		prep_mcu_end(cinfo, e);
	}
	prep_mcu_done(cinfo, e);
	return TRUE;
}

// prep_seq_row_block decodes one block of a scan of one component, for
// prep_seq_row: the MCU is that block.
__attribute__((always_inline)) static inline void prep_seq_row_block(j_decompress_ptr cinfo, prep_phuff *e, prep_br *br, JCOEF *blk) {
	int need = e->need[0];
	int diff = prep_seq_block(cinfo, e, br, e->dcb[0], e->acb[0], need == 2 ? blk : NULL);
	if (need) {
		int v = (int)((unsigned int)diff + (unsigned int)e->last_dc[0]);
		e->last_dc[0] = v;
		blk[0] = (JCOEF)v;
	}
	prep_br_mcu_end(cinfo, e, br);
}

// prep_seq_row is prep_seq_mcu for a row of a scan of one component.
PREP_ROW(, prep_seq_row, prep_seq_row_block)

// prep_seq_scan readies e for the scan libjpeg has just read the header
// of; check also makes libjpeg's start_pass checks.
static void prep_seq_scan(j_decompress_ptr cinfo, prep_phuff *e, boolean check) {
	prep_leftover(cinfo, e); // of the scan before
	if (check && (cinfo->Ss != 0 || cinfo->Se != DCTSIZE2 - 1 || cinfo->Ah != 0 || cinfo->Al != 0)) {
		WARNMS(cinfo, JWRN_NOT_SEQUENTIAL);
	}
	for (int ci = 0; ci < cinfo->comps_in_scan; ci++) {
		jpeg_component_info *comp = cinfo->cur_comp_info[ci];
		prep_make_htab(cinfo, TRUE, comp->dc_tbl_no, &e->tabs[0][comp->dc_tbl_no]);
		prep_make_htab(cinfo, FALSE, comp->ac_tbl_no, &e->tabs[1][comp->ac_tbl_no]);
		e->last_dc[ci] = 0;
	}
	for (int b = 0; b < cinfo->blocks_in_MCU; b++) {
		jpeg_component_info *comp = cinfo->cur_comp_info[cinfo->MCU_membership[b]];
		e->dcb[b] = e->tabs[0][comp->dc_tbl_no];
		e->acb[b] = e->tabs[1][comp->ac_tbl_no];
		// libjpeg's dc_needed and ac_needed: a 1×1 inverse DCT reads
		// only the DC coefficient.
		e->need[b] = !comp->component_needed ? 0 : comp->DCT_scaled_size > 1 ? 2 : 1;
	}
	e->row = cinfo->comps_in_scan == 1 && cinfo->blocks_in_MCU == 1 ? prep_seq_row : NULL;
	e->buf = 0;
	e->n = 0;
	e->fill = 0;
	e->pub.insufficient_data = FALSE;
	e->restarts_to_go = cinfo->restart_interval;
}

static void prep_seq_start_pass(j_decompress_ptr cinfo) {
	prep_seq_scan(cinfo, (prep_phuff *)cinfo->entropy, TRUE);
}

static unsigned long prep_seq_installs; // for the tests

static unsigned long prep_seq_count(void) {
	return __atomic_load_n(&prep_seq_installs, __ATOMIC_RELAXED);
}

// prep_seq_install replaces libjpeg's sequential entropy decoder with
// prep's before libjpeg reads the current scan's data, once libjpeg's
// start_pass has checked that scan (turbo.go's prep_install).
static void prep_seq_install(j_decompress_ptr cinfo) {
	__atomic_fetch_add(&prep_seq_installs, 1, __ATOMIC_RELAXED);
	prep_phuff *e = (prep_phuff *)(*cinfo->mem->alloc_small)((j_common_ptr)cinfo, JPOOL_IMAGE, sizeof(prep_phuff));
	memset(e, 0, sizeof *e);
	e->pub.start_pass = prep_seq_start_pass;
	e->pub.decode_mcu = prep_seq_mcu;
	cinfo->entropy = &e->pub;
	prep_seq_scan(cinfo, e, FALSE);
}
