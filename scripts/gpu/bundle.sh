#!/bin/bash
# Packs what ../shared/GPU-CHECKS.md needs on the GPU machine (no Go there):
# a stripped prep, its shared libraries (not glibc's), the bench/gpu test
# binary and prepshards' C kernel, into .gpu/bundle.tgz (git-ignored; about
# 26 MB). Then, through the device tool, with carry [".gpu"]:
#     bash scripts/gpu/run.sh
# which leaves its log and JSON results in $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOEXPERIMENT=simd
make build >/dev/null
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
go build -ldflags="-s -w" -o "$t/prep" ./cmd/prep
go test -c -ldflags="-s -w" -o "$t/gpu.test" ./bench/gpu
mkdir "$t/lib"
for l in $(ldd "$t/prep" | awk '/=>/{print $3}'); do
	case $(basename "$l") in libc.so* | libm.so* | libresolv* | ld-linux*) ;; *) cp -L "$l" "$t/lib/" ;; esac
done
cp python/prepshards/_window.so "$t/"
mkdir -p .gpu
git check-ignore -q .gpu || echo /.gpu/ >>.git/info/exclude
tar -C "$t" -czf .gpu/bundle.tgz prep gpu.test lib _window.so
ls -la .gpu/bundle.tgz
