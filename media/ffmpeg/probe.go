package ffmpeg

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Info describes a media file as ffprobe sees it.
type Info struct {
	Format   string  // container names, e.g. "matroska,webm"
	Duration float64 // seconds; 0 when unknown
	Streams  []Stream
}

// Stream is one stream of a media file. Fields that do not apply to its
// type, or that the file does not record, are zero.
type Stream struct {
	Index    int
	Type     string // "video", "audio", "subtitle", "data"
	Codec    string // "h264", "vp8", "flac", ...
	Duration float64

	Width, Height int
	FPS           float64 // r_frame_rate: the base rate of the timestamps
	AvgFPS        float64 // avg_frame_rate: frames over duration
	// Frames is the container's frame count (nb_frames); containers that
	// keep none (Matroska, WebM) get duration × AvgFPS, rounded, so it
	// is then an estimate.
	Frames int

	SampleRate int
	Channels   int

	// AttachedPic: a picture attached to the file (cover art), typed
	// "video" by ffprobe but one still image, not a video.
	AttachedPic bool
}

// Video returns the first video stream that is no attached picture.
func (i *Info) Video() (Stream, bool) {
	for _, s := range i.Streams {
		if s.Type == "video" && !s.AttachedPic {
			return s, true
		}
	}
	return Stream{}, false
}

// Audio returns the first audio stream.
func (i *Info) Audio() (Stream, bool) { return i.first("audio") }

func (i *Info) first(typ string) (Stream, bool) {
	for _, s := range i.Streams {
		if s.Type == typ {
			return s, true
		}
	}
	return Stream{}, false
}

// probeJSON is the part of `ffprobe -of json` that Info holds. ffprobe
// writes most numbers as strings.
type probeJSON struct {
	Format struct {
		FormatName string `json:"format_name"`
		Duration   string `json:"duration"`
	} `json:"format"`
	Streams []struct {
		Index        int    `json:"index"`
		CodecType    string `json:"codec_type"`
		CodecName    string `json:"codec_name"`
		Width        int    `json:"width"`
		Height       int    `json:"height"`
		RFrameRate   string `json:"r_frame_rate"`
		AvgFrameRate string `json:"avg_frame_rate"`
		NbFrames     string `json:"nb_frames"`
		Duration     string `json:"duration"`
		SampleRate   string `json:"sample_rate"`
		Channels     int    `json:"channels"`
		Disposition  struct {
			AttachedPic int `json:"attached_pic"`
		} `json:"disposition"`
	} `json:"streams"`
}

// Probe describes the file at path with ffprobe.
func Probe(ctx context.Context, path string) (Info, error) {
	cmd, stderr, err := command(ctx, "ffprobe", "-v", "error", "-of", "json",
		"-show_format", "-show_streams", fileURL(path))
	if err != nil {
		return Info{}, err
	}
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return Info{}, fmt.Errorf("ffprobe %s: %w", path, ctx.Err())
		}
		return Info{}, runError(path, stderr, err)
	}
	var p probeJSON
	if err := json.Unmarshal(out, &p); err != nil {
		return Info{}, fmt.Errorf("ffprobe %s: read its JSON: %w", path, err)
	}
	info := Info{Format: p.Format.FormatName, Duration: number(p.Format.Duration)}
	for _, s := range p.Streams {
		st := Stream{
			Index:      s.Index,
			Type:       s.CodecType,
			Codec:      s.CodecName,
			Duration:   number(s.Duration),
			Width:      s.Width,
			Height:     s.Height,
			FPS:        ratio(s.RFrameRate),
			AvgFPS:     ratio(s.AvgFrameRate),
			Frames:     int(number(s.NbFrames)),
			SampleRate: int(number(s.SampleRate)),
			Channels:   s.Channels,

			AttachedPic: s.Disposition.AttachedPic != 0,
		}
		if st.Duration == 0 {
			st.Duration = info.Duration
		}
		if st.Type == "video" && st.Frames == 0 {
			st.Frames = int(math.Round(st.Duration * st.AvgFPS))
		}
		info.Streams = append(info.Streams, st)
	}
	return info, nil
}

// number parses one of ffprobe's numeric strings; "N/A" and "" are 0.
func number(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// ratio parses a rate like "30000/1001"; "0/0" is 0.
func ratio(s string) float64 {
	num, den, ok := strings.Cut(s, "/")
	if !ok {
		return number(s)
	}
	d := number(den)
	if d == 0 {
		return 0
	}
	return number(num) / d
}
