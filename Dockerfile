# prep in a container, for Cloud Build, Cloud Batch and Kubernetes (see deploy/).
#
#   docker build -t prep .
#   docker run --rm prep convert gs://BUCKET/raw gs://BUCKET/shards --recipe "resize=256,crop=224" --seed 7
#
# Build stage: cgo for libhdf5, libpng, libdeflate, libFLAC, libmpg123 and libopusfile (linked dynamically),
# libjpeg-turbo and libwebp (linked statically, media/imgdec/turbo.go) and the headers of libheif
# and libjxl (loaded at run time, media/imgdec/heif_cgo.go).
FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libhdf5-dev libjpeg62-turbo-dev libpng-dev libdeflate-dev libwebp-dev libheif-dev libjxl-dev libflac-dev libmpg123-dev libopusfile-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The resampler's AVX-512 loops (augment/resample_simd.go) need Go's simd experiment.
ENV GOEXPERIMENT=simd
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/prep ./cmd/prep

# Runtime: the shared libraries the binary links (ldd: libhdf5_serial.so.103
# and libhdf5_serial_hl.so.100, which pull in the rest; libpng16.so.16; libdeflate.so.0; libFLAC.so.12; libmpg123.so.0; libopusfile.so.0), libheif
# and libjxl for HEIF, AVIF and JPEG XL inputs (opened at run time), ffmpeg for video and audio inputs, and CA certificates
# for TLS to storage.googleapis.com.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libhdf5-103-1 libhdf5-hl-100 libjpeg62-turbo libpng16-16 libdeflate0 libmpg123-0 libflac12 libopusfile0 libheif1 libjxl0.7 ffmpeg ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/prep /usr/local/bin/prep
# gs:// destinations stage each shard here until its upload is confirmed;
# point it at a scratch disk when /tmp is small (a few shards at a time).
ENV PREP_STAGING=/tmp
# Runs as root so it can write to scratch disks the batch engines mount
# root-owned; set a user in the job spec where that is not needed.
ENTRYPOINT ["prep"]
CMD ["--help"]
