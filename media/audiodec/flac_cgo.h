// flac_cgo.h: the state flac_cgo.c keeps for one FLAC stream decoded by
// libFLAC (flac_cgo.go). Included twice in flac_cgo.c (itself and through
// _cgo_export.h), hence the guard.
#ifndef PREP_FLAC_CGO_H
#define PREP_FLAC_CGO_H
#include <stdint.h>
#include <FLAC/stream_decoder.h>

typedef struct {
	FLAC__StreamDecoder *dec;
	uintptr_t reader;  // a cgo.Handle of the Go reader the stream comes from
	// STREAMINFO, once the metadata is read.
	int got_info;
	unsigned rate, channels, bits;
	FLAC__uint64 total;
	// The last frame: blocksize samples of each of its channels, one
	// channel after another in planar (cap: how many it holds).
	FLAC__int32 *planar;
	size_t cap;
	unsigned blocksize, frame_channels;
	int ready;     // a frame was written since the last prep_flac_next
	int error;     // the first FLAC__StreamDecoderErrorStatus + 1; 0: none
	int oom;       // planar could not grow
} prep_flac;

prep_flac *prep_flac_new(uintptr_t reader);
int prep_flac_next(prep_flac *f);
void prep_flac_free(prep_flac *f);
const char *prep_flac_error_string(int error);
#endif
