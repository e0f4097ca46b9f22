# prep — see README.md. `make demo` and `make test` work on a fresh Debian/Ubuntu
# machine: `make deps` installs what is missing first.
SHELL := /bin/bash
GO ?= go
# The resampler's AVX-512 loops (augment/resample_simd.go) use Go's experimental
# simd/archsimd package; without it build, test, bench and demo run the scalar loops.
export GOEXPERIMENT=simd
BIN := bin/prep
NATIVE := python/prepshards/_window.so
APT_PKGS := libhdf5-dev hdf5-tools pkg-config gcc ffmpeg sox libsox-fmt-all \
            libjpeg62-turbo-dev libpng-dev libdeflate-dev libwebp-dev libheif-dev libjxl-dev libflac-dev libmpg123-dev libopusfile-dev python3-h5py python3-pil python3-numpy \
            python3-torch python3-torchvision python3-pytest ca-certificates qemu-user-static bash-completion python3-venv \
            libheif-examples libjxl-tools python3-cryptography
# Debian's interpreter, with the python3-* packages above: the Python reader's
# tests run on it (a python3 earlier on PATH may lack them).
PYTHON := /usr/bin/python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build python-native install test test-slurm fuzz bench bench-train cross cross-cgo demo vet clean

all: build

# apt_install installs, with apt-get, only the packages of $(1) that are
# missing; $(2) adds options to apt-get install.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(2) $$missing >/dev/null; \
	fi
endef

# deps installs what the build and the tests need.
deps:
	$(call apt_install,$(APT_PKGS))
	@command -v $(GO) >/dev/null || { echo "Go 1.26+ is required: https://go.dev/doc/install"; exit 1; }
	$(GO) mod download

build: deps $(NATIVE)
	$(GO) build -o $(BIN) ./cmd/prep

# prepshards' C crop/flip kernel, in place for the tests and benches that
# import prepshards from python/ (pip builds its own: python/setup.py).
$(NATIVE): python/prepshards/_window.c
	$(CC) -O2 -Wall -Wextra -shared -fPIC -o $@ $<
python-native: $(NATIVE)

# install builds prep as build does (GOEXPERIMENT=simd, cgo decoders) and
# copies it to $(DESTDIR)$(PREFIX)/bin, with sudo only for that copy when
# the folder is not writable: `make install PREFIX=~/.local` needs no root.
# A plain `go install` would build without GOEXPERIMENT=simd.
PREFIX ?= /usr/local
install: build
	@dir="$(DESTDIR)$(PREFIX)/bin"; sudo=""; \
	mkdir -p "$$dir" 2>/dev/null && [ -w "$$dir" ] || sudo="$(SUDO)"; \
	$$sudo install -D -m 0755 $(BIN) "$$dir/prep" || exit 1; \
	echo "installed $$dir/prep: \`prep version\` lists its fast paths"; \
	[ -n "$(DESTDIR)" ] || case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "$(PREFIX)/bin is not on your PATH: add it";; esac

vet:
	gofmt -l . | (! grep .) && $(GO) vet ./...

# A Go test skips only for hardware this machine lacks (a GPU, an
# instruction set: internal/testenv); under CI=true a missing tool fails.
# The hardware skips are listed in out/test-skips, summed up last.
test: deps vet build
	@mkdir -p out && : > out/test-skips
	PREP_TEST_SKIPS=$(CURDIR)/out/test-skips $(GO) test -race -count=1 -timeout 15m ./...
	$(GO) test -count=1 -tags noprepentropy ./media/imgdec/
	$(MAKE) --no-print-directory test-slurm
	PREP_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider python/tests
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME_TEST)
	$(MAKE) --no-print-directory cross
	@echo "skipped for want of hardware: $$(grep -v ': stub: ' out/test-skips | sort -u | paste -sd ';' - | sed 's/;/; /g' | grep . || echo none)"
	@echo "ran on a stub for want of hardware: $$(grep ': stub: ' out/test-skips | sed 's/: stub: /: /' | sort -u | paste -sd ';' - | sed 's/;/; /g' | grep . || echo none)"

# test-slurm runs deploy/slurm.sbatch on a real one-node Slurm cluster
# (TestSlurmArray, cmd/prep/slurm_test.go): 4 array tasks, one requeued
# mid-run, checked against one process's shards. It installs Debian's
# slurmctld, slurmd and munge if missing, here rather than in deps, which
# users run to build prep; the test starts the daemons as root in a temp
# folder (no systemd needed) and stops them after. Without root it skips,
# and under CI=true it fails.
SLURM_PKGS := slurmctld slurmd slurm-client munge
test-slurm: deps
	$(call apt_install,$(SLURM_PKGS),--no-install-recommends)
	PREP_TEST_SLURM=1 $(GO) test -count=1 -timeout 5m -v -run '^TestSlurmArray$$' ./cmd/prep/

# fuzz runs every Go fuzz target (scripts/fuzz.sh finds them) for FUZZTIME
# each, one after the other: `make fuzz FUZZTIME=10m`. `make test` runs
# each for FUZZTIME_TEST. A failing input is kept under the package's
# testdata/fuzz/ as a regression seed, which `go test` then runs.
FUZZTIME ?= 60s
FUZZTIME_TEST ?= 3s
fuzz:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME)

# The GCS benchmarks add 20 ms to each of 2,000 requests: one round each.
# bench-images.py converts 300 real photos of 300-4,000 px and 1,000 of
# 300-1,600 px (made once into out/benchphotos and out/benchphotos-small by
# scripts/benchphotos.py from Debian packages) with prep and with a typical
# PIL + h5py script, with and without Image.draft; bench-audio.py converts
# 200 real clips (out/benchaudio, by scripts/benchaudio.py) with prep and
# with sox and ffmpeg run per file; bench-video.py converts 12 videos made
# from the photos with prep and with ffmpeg alone: docs/PERFORMANCE.md.
# BenchmarkIsolation (after bench-images.py has made the photos): HEIC,
# AVIF and JPEG XL made from 16 of them, decoded in child processes and in
# process. bench_online.py: samples/s of
# prepshards' online crop/flip against torchvision ImageFolder and against
# no online ops (docs/TRAINING.md).
bench: build
	$(GO) test -run '^$$' -bench . -skip 'GCS|Isolation' -benchmem -benchtime 3x ./...
	$(GO) test -run '^$$' -bench GCS -benchtime 1x ./cloudsrc/ ./convert/
	@echo "cpu: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); flags:$$(grep -m1 -o -w 'avx2\|avx512f\|avx512vbmi' /proc/cpuinfo | sort -u | tr '\n' ' ')"
	rm -rf out/bench-reader
	$(BIN) convert testdata/images out/bench-reader --recipe "resize=256,crop=224" --copies 200 --seed 1 >/dev/null
	$(PYTHON) python/bench/bench_reader.py out/bench-reader --prep $(BIN)
	$(PYTHON) python/bench/bench_gcs.py out/bench-reader --direct 1
	$(PYTHON) python/bench/bench_gcs.py out/bench-reader --direct 0
	$(PYTHON) scripts/bench-images.py --prep $(BIN)
	$(GO) test -run '^$$' -bench Isolation -benchtime 3x ./media/imgdec/
	$(PYTHON) python/bench/bench_online.py --prep $(BIN)
	$(PYTHON) scripts/bench-audio.py --prep $(BIN)
	$(PYTHON) scripts/bench-video.py --prep $(BIN)

# bench-train trains a tiny CNN on Fashion-MNIST (Debian's
# dataset-fashion-mnist, installed here only) under torchvision's online
# augmentation, prep --copies 1, --copies E and a split recipe, 3 seeds
# each (~20-30 min on 2 cores), then on the bench photos, 5 seeds (~10
# min): docs/TRAINING.md.
bench-train: build
	$(call apt_install,dataset-fashion-mnist)
	$(PYTHON) scripts/bench-train.py --prep $(BIN) --json out/bench-train.json
	$(PYTHON) scripts/benchphotos.py
	$(PYTHON) scripts/bench-train.py --prep $(BIN) --photos out/benchphotos --epochs 30 \
	  --seeds 0 1 2 3 4 --json out/bench-train-photos.json

# cross builds prep's packages for arm64 (the Graviton and Axion VM types)
# and runs the pure-Go packages' tests there under qemu-user-static; on
# arm64 the SIMD loops are left out, TestResampleBytes checks that the
# image resampler gives amd64's bytes and TestConverterBytes the audio
# one. CGO_ENABLED=0: libhdf5 and libjpeg-turbo are C, so formats/hdf5,
# cmd/prep, bench and convert's tests, which link libhdf5, are left out
# (imgdec falls back to Go's decoders).
CROSS_BUILD := ./augment/ ./convert/ ./media/ ./cloudsrc/... ./formats/ ./media/ffmpeg/ ./media/imgdec/ \
               ./formats/manifest/ ./formats/npy/ ./formats/tarshard/ ./formats/wav/ ./media/pcm/ \
               ./media/audiodec/ ./bench/gpu/
CROSS_TEST := ./augment/ ./media/ ./cloudsrc/ ./formats/ ./media/imgdec/ ./formats/manifest/ ./formats/npy/ \
              ./formats/tarshard/ ./formats/wav/ ./media/pcm/
cross: deps
	CGO_ENABLED=0 GOARCH=arm64 $(GO) build $(CROSS_BUILD)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) vet $(CROSS_TEST)
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static $(CROSS_TEST)

# cross-cgo builds media/imgdec for arm64 with cgo, so with libjpeg-turbo,
# libpng and prep's own entropy decoders in C (phuff.h, shuff.h, which make
# cross leaves out), and runs its decoder tests under qemu-user-static: the
# same pixels as libjpeg-turbo's NEON build, on well-formed and damaged
# files. Not part of `make test`: it adds Debian's arm64 architecture and
# a cross compiler to the machine (about 100 MB).
CROSS_CGO_PKGS := gcc-aarch64-linux-gnu libc6-dev:arm64 libjpeg62-turbo-dev:arm64 libpng-dev:arm64 libdeflate-dev:arm64 libwebp-dev:arm64 libheif-dev:arm64 libjxl-dev:arm64
cross-cgo: deps
	@dpkg --print-foreign-architectures | grep -qx arm64 || $(SUDO) dpkg --add-architecture arm64
	$(call apt_install,$(CROSS_CGO_PKGS))
	mkdir -p out
	CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc GOARCH=arm64 $(GO) test -c -o out/imgdec-arm64.test ./media/imgdec/
	cd media/imgdec && qemu-aarch64-static ../../out/imgdec-arm64.test -test.count=1 \
	  -test.run 'SameCoefficients|EntropyDamaged|DropACScans|ScaledMatchesFull|PixelsMatchPillow|PNGDecodersAgree'

demo: build
	rm -rf out/demo
	$(BIN) convert testdata/images out/demo --recipe "resize=256,crop=224:random,hflip=0.5" --seed 7 --copies 2
	$(BIN) inspect out/demo --verify
	$(BIN) bench-read out/demo

clean:
	rm -rf bin out $(NATIVE)
