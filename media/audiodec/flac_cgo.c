//go:build cgo

// flac_cgo.c: libFLAC's stream decoder behind a pull interface for
// flac_cgo.go: prep_flac_next decodes one frame into f->planar. The
// stream's bytes come from Go through prepFlacRead. In a C file of its
// own because a Go file that exports functions may only declare C ones.

#include <stdlib.h>
#include <string.h>
#include "flac_cgo.h"
#include "_cgo_export.h"

static FLAC__StreamDecoderReadStatus prep_flac_read(const FLAC__StreamDecoder *d, FLAC__byte buffer[], size_t *bytes, void *client) {
	prep_flac *f = (prep_flac *)client;
	if (*bytes == 0) {
		return FLAC__STREAM_DECODER_READ_STATUS_ABORT;
	}
	size_t n = *bytes;
	int rc = prepFlacRead(f->reader, buffer, &n);
	*bytes = n;
	if (rc == 0) {
		return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE;
	}
	if (rc == 1) {
		return FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM;
	}
	return FLAC__STREAM_DECODER_READ_STATUS_ABORT;
}

static FLAC__StreamDecoderWriteStatus prep_flac_write(const FLAC__StreamDecoder *d, const FLAC__Frame *frame, const FLAC__int32 *const buffer[], void *client) {
	prep_flac *f = (prep_flac *)client;
	unsigned ch = frame->header.channels, n = frame->header.blocksize;
	size_t need = (size_t)ch * n;
	if (need > f->cap) {
		FLAC__int32 *p = (FLAC__int32 *)realloc(f->planar, need * sizeof *p);
		if (p == NULL) {
			f->oom = 1;
			return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
		}
		f->planar = p;
		f->cap = need;
	}
	for (unsigned c = 0; c < ch; c++) {
		memcpy(f->planar + (size_t)c * n, buffer[c], n * sizeof *f->planar);
	}
	f->blocksize = n;
	f->frame_channels = ch;
	f->ready = 1;
	return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE;
}

static void prep_flac_metadata(const FLAC__StreamDecoder *d, const FLAC__StreamMetadata *m, void *client) {
	prep_flac *f = (prep_flac *)client;
	if (m->type == FLAC__METADATA_TYPE_STREAMINFO) {
		f->rate = m->data.stream_info.sample_rate;
		f->channels = m->data.stream_info.channels;
		f->bits = m->data.stream_info.bits_per_sample;
		f->total = m->data.stream_info.total_samples;
		f->got_info = 1;
	}
}

static void prep_flac_error(const FLAC__StreamDecoder *d, FLAC__StreamDecoderErrorStatus status, void *client) {
	prep_flac *f = (prep_flac *)client;
	if (f->error == 0) {
		f->error = (int)status + 1;
	}
}

// prep_flac_new starts decoding the stream that reader gives and reads its
// metadata: NULL when out of memory; otherwise f->got_info and f->error
// say how that went.
prep_flac *prep_flac_new(uintptr_t reader) {
	prep_flac *f = (prep_flac *)calloc(1, sizeof *f);
	if (f == NULL) {
		return NULL;
	}
	f->reader = reader;
	f->dec = FLAC__stream_decoder_new();
	if (f->dec == NULL) {
		free(f);
		return NULL;
	}
	if (FLAC__stream_decoder_init_stream(f->dec, prep_flac_read, NULL, NULL, NULL, NULL,
			prep_flac_write, prep_flac_metadata, prep_flac_error, f) != FLAC__STREAM_DECODER_INIT_STATUS_OK) {
		prep_flac_free(f);
		return NULL;
	}
	FLAC__stream_decoder_process_until_end_of_metadata(f->dec);
	return f;
}

// prep_flac_next decodes up to the next frame: 1 when one is in
// f->planar, 0 at the end of the stream, -1 on an error (f->error,
// f->oom, or the reader's).
int prep_flac_next(prep_flac *f) {
	f->ready = 0;
	while (!f->ready) {
		FLAC__bool ok = FLAC__stream_decoder_process_single(f->dec);
		if (f->error || f->oom) {
			return -1;
		}
		FLAC__StreamDecoderState s = FLAC__stream_decoder_get_state(f->dec);
		if (s == FLAC__STREAM_DECODER_END_OF_STREAM) {
			return f->ready;
		}
		if (!ok || s > FLAC__STREAM_DECODER_END_OF_STREAM) {
			return -1; // aborted (the reader's error) or out of memory
		}
	}
	return 1;
}

void prep_flac_free(prep_flac *f) {
	if (f->dec != NULL) {
		FLAC__stream_decoder_delete(f->dec);
	}
	free(f->planar);
	free(f);
}

// prep_flac_error_string names f->error (a status + 1).
const char *prep_flac_error_string(int error) {
	return FLAC__StreamDecoderErrorStatusString[error - 1];
}
