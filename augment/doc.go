// Package augment applies a recipe of data-augmentation ops to one
// decoded sample (an image or interleaved PCM audio), drawing every random
// value from a caller-supplied *rand.Rand. Its transforms are pure: no
// I/O (the caller reads a recipe file; ParseFile parses its bytes) and no
// shared state.
//
// # Recipe grammar
//
// The one-line form is a comma-separated list of ops, applied in order:
//
//	recipe = op { "," op }
//	op     = name "=" value
//
// Image ops (S, W, H: positive integers in pixels; P: a probability in
// [0,1]; LO-HI: an inclusive range, "X" alone meaning exactly X):
//
//	resize=S           shorter side to S, aspect kept (long side truncated, as torchvision)
//	resize=WxH         exactly W x H
//	resize=WxH:fit     inside W x H, aspect kept, centered on black
//	crop=S | crop=WxH  center crop (round-half-even offsets, as torchvision)
//	crop=S:random      crop at a uniform random position
//	rrc=S | rrc=WxH    torchvision's RandomResizedCrop, scale 0.08-1, ratio 3/4-4/3;
//	                   options rrc=224:scale=0.2-1:ratio=0.75-1.333
//	hflip=P, vflip=P   mirror left-right / top-bottom with probability P
//	rotate=DEG         rotate by a uniform angle in [-DEG, DEG] degrees, same size, black corners
//	jitter=B/C/S/H     torchvision's ColorJitter(B, C, S, H); fewer values leave the rest 0
//	gray=P             grayscale (ITU-R 601-2 luma, 3 channels) with probability P
//	blur=SIGMA|LO-HI   gaussian blur, sigma fixed or uniform in the range
//
// Audio ops (on interleaved float PCM in [-1, 1]; every op clips to it):
//
//	gain=DB|LO-HI        gain in dB, fixed or uniform ("-6-6" is -6 to 6)
//	shift=SECONDS        time shift uniform in [-SECONDS, SECONDS], whole frames, zero-filled
//	shift=SECONDS:roll   the same, circular
//	noise=SNR_DB|LO-HI   white gaussian noise at that SNR relative to the signal's RMS
//
// Image ops ignore audio and audio ops ignore images, so one recipe may
// hold both. Recipe.String gives the canonical form, which Parse reads
// back to an equal recipe.
//
// Resizing uses the Catmull-Rom filter (PIL's bicubic kernel) with
// imaging's weights, in fixed point for opaque images (within 1 of
// imaging.Resize); a resize followed by a crop resamples only the pixels
// the crop keeps. A crop
// larger than the image pads it with black, centered, as torchvision's
// CenterCrop does, also for random crops (where torchvision would fail):
// one odd image must not abort a conversion.
//
// # Recipe files
//
// ParseFile parses YAML (.yaml, .yml) or JSON (.json): a list of ops, each a
// one-line op string, or a map from the op name to its one-line value or
// to named parameters:
//
//	# recipe.yaml
//	- resize: 256
//	- crop: 224:random
//	- hflip=0.5
//	- rrc: {size: 224, scale: [0.2, 1], ratio: [0.75, 1.333]}
//	- jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.4, hue: 0.1}
//	- blur: {sigma: [0.1, 2]}
//
// Named parameters: resize {size | width, height; fit}, crop {size | width,
// height; random}, rrc {size | width, height; scale; ratio}, hflip, vflip
// and gray {p}, rotate {degrees}, jitter {brightness, contrast, saturation,
// hue}, blur {sigma}, gain {db}, shift {seconds; roll}, noise {snr_db}.
//
// # Randomness
//
// Ops draw from the rng in recipe order, each a fixed sequence documented
// on the op, so the same input and rng state give the same bytes. Apply
// and ApplyAudio return the values drawn, keyed by op name (a repeated op
// gets "name.2", ...), ready for JSON:
//
//	crop, rrc   [x, y, w, h] of the window in input pixels
//	hflip, vflip, gray   whether it happened
//	rotate      the angle in degrees
//	jitter      {"brightness": f, ..., "order": [names in applied order]}
//	blur        sigma, gain: dB, noise: SNR dB (only when a range)
//	shift       {"frames": n, "seconds": n/rate} in JSON; positive is later
package augment
