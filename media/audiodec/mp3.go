package audiodec

import (
	"bufio"
	"encoding/binary"
)

// mpegHeader is an MPEG audio frame header (4 bytes, ISO 11172-3 and
// 13818-3, with MPEG 2.5).
type mpegHeader struct {
	version int // 1, 2, or 25 for MPEG 2.5
	layer   int // 1, 2 or 3
	rate    int // Hz
	mono    bool
	size    int // bytes, header included
}

// parseMPEGHeader reads the frame header at b: ok is false for anything
// but a valid header of a known bitrate (free format has none).
func parseMPEGHeader(b []byte) (h mpegHeader, ok bool) {
	if len(b) < 4 || b[0] != 0xff || b[1]&0xe0 != 0xe0 {
		return h, false
	}
	ver, layer := (b[1]>>3)&3, (b[1]>>1)&3
	br, sr, pad := int(b[2]>>4), int(b[2]>>2)&3, int(b[2]>>1)&1
	if ver == 1 || layer == 0 || br == 0 || br == 15 || sr == 3 {
		return h, false
	}
	h.version = map[byte]int{0: 25, 2: 2, 3: 1}[ver]
	h.layer = 4 - int(layer)
	h.rate = [3]int{44100, 48000, 32000}[sr]
	switch h.version {
	case 2:
		h.rate /= 2
	case 25:
		h.rate /= 4
	}
	h.mono = b[3]>>6 == 3
	// Bitrates in kbit/s, by [MPEG-1?][layer-1][index].
	rates := [2][3][15]int{
		{{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}},
		{{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448},
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384},
			{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}},
	}
	v1 := 0
	if h.version == 1 {
		v1 = 1
	}
	bps := rates[v1][h.layer-1][br] * 1000
	switch {
	case h.layer == 1:
		h.size = (12*bps/h.rate + pad) * 4
	case h.layer == 3 && h.version != 1:
		h.size = 72*bps/h.rate + pad
	default:
		h.size = 144*bps/h.rate + pad
	}
	return h, true
}

// samplesPerFrame is how many samples (per channel) one frame decodes to.
func (h mpegHeader) samplesPerFrame() int {
	switch {
	case h.layer == 1:
		return 384
	case h.layer == 3 && h.version != 1:
		return 576
	}
	return 1152
}

// mp3Info is what sniffMP3 learns of an MP3 stream before decoding it.
type mp3Info struct {
	first mpegHeader
	// frames: the MPEG frames the Xing/Info header announces (not
	// counting its own); 0: no such header, the length is unknown.
	frames int64
}

// id3Size is the length of the ID3v2 tag at the start of b (0: none).
func id3Size(b []byte) int {
	if len(b) < 10 || string(b[:3]) != "ID3" || b[3] == 0xff || b[5]&0x0f != 0 ||
		b[6]|b[7]|b[8]|b[9] >= 0x80 {
		return 0
	}
	n := 10 + (int(b[6])<<21 | int(b[7])<<14 | int(b[8])<<7 | int(b[9]))
	if b[5]&0x10 != 0 { // a footer
		n += 10
	}
	return n
}

// sniffMP3 reports whether r holds an MPEG-1/2/2.5 Layer III stream
// that libmpg123 decodes as ffmpeg would: after optional ID3v2 tags,
// a Layer III frame header followed by a second one of the same kind
// where the first frame ends (two in a row: random bytes rarely are).
// Anything else (Layer I/II, free format, a VBRI header, whose gapless
// fields ffmpeg reads otherwise) is left to ffmpeg. It consumes the
// ID3v2 tags; Decode opens the file anew for ffmpeg.
func sniffMP3(r *bufio.Reader) (info mp3Info, ok bool) {
	// Step over ID3v2 tags (a file may hold several, and cover art makes
	// them large): libmpg123 needs the frames only.
	for range 4 {
		head, _ := r.Peek(10)
		n := id3Size(head)
		if n == 0 {
			break
		}
		if k, err := r.Discard(n); k != n || err != nil {
			return info, false
		}
	}
	at := 0
	b, _ := r.Peek(min(r.Size(), at+4096))
	// ffmpeg and libmpg123 both step over zero padding after the tag.
	for at < len(b) && b[at] == 0 && at < 2048 {
		at++
	}
	h, ok := parseMPEGHeader(b[min(at, len(b)):])
	if !ok || h.layer != 3 || at+h.size+4 > len(b) {
		return info, false
	}
	next, ok := parseMPEGHeader(b[at+h.size:])
	if !ok || next.layer != 3 || next.version != h.version || next.rate != h.rate {
		return info, false
	}
	info.first = h
	frame := b[at : at+h.size]
	// The Xing/Info header sits after the side information.
	side := map[[2]bool]int{{true, true}: 17, {true, false}: 32, {false, true}: 9, {false, false}: 17}[[2]bool{h.version == 1, h.mono}]
	if x := frame[min(len(frame), 4+side):]; len(x) >= 12 && (string(x[:4]) == "Xing" || string(x[:4]) == "Info") {
		if flags := binary.BigEndian.Uint32(x[4:]); flags&1 != 0 {
			info.frames = int64(binary.BigEndian.Uint32(x[8:]))
		}
	}
	if len(frame) >= 40 && string(frame[36:40]) == "VBRI" {
		return info, false
	}
	return info, true
}
