#!/bin/sh
# Generates testdata/video and testdata/audio with ffmpeg's lavfi sources.
# Run from the repository root: sh testdata/make_media.sh
# -bitexact and -map_metadata -1 keep encoder versions and dates out of the
# files; x264 runs single-threaded so its output does not depend on cores.
set -eu
v=testdata/video
a=testdata/audio
mkdir -p "$v" "$a"
ff() { ffmpeg -nostdin -v error -y "$@"; }
common="-map_metadata -1 -fflags +bitexact -flags:v +bitexact -flags:a +bitexact"

# Video: testsrc2 (a moving colour pattern with a frame counter), 64x48.
ff -f lavfi -i testsrc2=size=64x48:rate=25:duration=2 $common \
   -c:v libx264 -threads 1 -preset medium -pix_fmt yuv420p "$v/testsrc.mp4"          # 50 frames, 25 fps
ff -f lavfi -i testsrc2=size=64x48:rate=30:duration=1 $common \
   -c:v mpeg4 -q:v 4 "$v/testsrc.mkv"                                                 # 30 frames, 30 fps
ff -f lavfi -i testsrc2=size=64x48:rate=24:duration=1.5 $common \
   -c:v libvpx -b:v 200k -threads 1 "$v/testsrc.webm"                                 # 36 frames, 24 fps
ff -f lavfi -i testsrc2=size=64x48:rate=10:duration=2 $common \
   -c:v mpeg4 -q:v 4 "$v/testsrc.avi"                                                 # 20 frames, 10 fps
# corrupt.mp4: the first 60% of testsrc.mp4; the moov atom (written last)
# is gone, so ffmpeg cannot open it.
size=$(wc -c < "$v/testsrc.mp4")
head -c $((size * 6 / 10)) "$v/testsrc.mp4" > "$v/corrupt.mp4"
# truncated.mp4 and truncated.mkv are cut off with their index intact (the
# moov atom moved to the front; Matroska needs none): ffmpeg decodes the
# frames before the cut, logs the damage and exits 0.
ff -i "$v/testsrc.mp4" -c copy $common -movflags +faststart /tmp/prep-faststart.mp4
size=$(wc -c < /tmp/prep-faststart.mp4)
head -c $((size * 8 / 10)) /tmp/prep-faststart.mp4 > "$v/truncated.mp4"
rm /tmp/prep-faststart.mp4
size=$(wc -c < "$v/testsrc.mkv")
head -c $((size * 7 / 10)) "$v/testsrc.mkv" > "$v/truncated.mkv"

# Audio: a 440 Hz sine, 1 s, at assorted rates and channel counts.
sine="sine=frequency=440:duration=1"
ff -f lavfi -i "$sine:sample_rate=22050" $common -ac 2 -c:a pcm_s16le "$a/sine.wav"      # stereo
ff -f lavfi -i "$sine:sample_rate=16000" $common -c:a flac "$a/sine.flac"
ff -f lavfi -i "$sine:sample_rate=44100" $common -c:a libmp3lame -b:a 64k "$a/sine.mp3"
ff -f lavfi -i "$sine:sample_rate=32000" $common -ac 2 -c:a libvorbis -q:a 2 "$a/sine.ogg"  # stereo
ff -f lavfi -i "$sine:sample_rate=48000" $common -c:a libopus -b:a 32k "$a/sine.opus"
# Half a second, without the Xing/Info header: its length is known only once decoded.
ff -f lavfi -i "sine=frequency=440:duration=0.5:sample_rate=22050" $common -c:a libmp3lame -b:a 32k -write_xing 0 "$a/noinfo.mp3"
# truncated.wav is cut inside its header (no data chunk: ffmpeg refuses it);
# truncated.mp3 is the first half of sine.mp3 (prep skips it as cut off).
head -c 40 "$a/sine.wav" > "$a/truncated.wav"
size=$(wc -c < "$a/sine.mp3")
head -c $((size / 2)) "$a/sine.mp3" > "$a/truncated.mp3"
