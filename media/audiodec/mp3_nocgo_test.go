//go:build !cgo

package audiodec

// mp3Decoder is the decoder of MP3 files in this build.
const mp3Decoder Decoder = "ffmpeg"

// opusDecoder is the decoder of Opus files in this build.
const opusDecoder Decoder = "ffmpeg"
