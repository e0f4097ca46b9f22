#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module, one at a time, for a
# while each: `scripts/fuzz.sh 60s`, or `scripts/fuzz.sh 10m ./formats/npy`
# for one package. The targets are found with the test binary's
# -test.list '^Fuzz', so a new one runs without being listed here. It
# stops at the first target that fails; the failing input is then under
# that package's testdata/fuzz/, where it stays as a regression seed that
# plain `go test` runs.
#
# Each package's test binary is built once, with the fuzzing
# instrumentation, and run for each of its targets, as `go test -fuzz`
# would run it (in the package's folder, with the corpus go test keeps in
# GOCACHE), but without linking it again for every target.
#
# FUZZMINIMIZETIME bounds the minimizing of each new input: go test's
# default, 60s, can spend a whole short run minimizing one input of a few
# KB, as with a tar shard (golang/go#48820).
set -euo pipefail

fuzztime=${1:-60s}
shift || true
go=${GO:-go}
minimize=${FUZZMINIMIZETIME:-2s}
cd "$(dirname "$0")/.."

pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	# Only packages that have a target: each costs a test build.
	mapfile -t pkgs < <(grep -rl --include='*_test.go' --exclude-dir=out '^func Fuzz' . | xargs -n1 dirname | sort -u)
fi

# coordinator_deadline reports whether a failed run's output is only the
# error Go's fuzzing coordinator can return when -fuzztime ends while a
# worker is busy (golang/go#75804, in Go 1.26; fixed in 1.27): a bare
# "context deadline exceeded", no failing input written, no panic.
coordinator_deadline() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -q -e 'Failing input written' -e '^panic' -e 'fuzzing process hung' "$1"
}

cache=$("$go" env GOCACHE)/fuzz
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

start=$SECONDS
count=0
listing=$("$go" list -f '{{.ImportPath}} {{.Dir}}' "${pkgs[@]}")
while read -r importpath dir; do
	test="$bin/${importpath//\//_}.test"
	"$go" test -c -fuzz . -o "$test" "$importpath"
	targets=$(cd "$dir" && "$test" -test.list '^Fuzz')
	for target in $targets; do
		echo "fuzz: $importpath $target for $fuzztime"
		# The progress lines, every 3 s, are left out. The output waits in a
		# file: a run that ends in Go's own deadline error (below) passed,
		# and its "--- FAIL" line must not stand in a passing log.
		if (cd "$dir" && "$test" -test.run '^$' -test.fuzz "^$target\$" -test.fuzztime "$fuzztime" \
			-test.fuzzminimizetime "$minimize" -test.fuzzcachedir "$cache/$importpath" -test.paniconexit0 </dev/null) 2>&1 |
			awk '!/^fuzz: elapsed/' >"$bin/out"; then
			cat "$bin/out"
		elif coordinator_deadline "$bin/out"; then
			echo "fuzz: $target: passed (ended by Go's own end-of-run deadline error, no failing input: golang/go#75804, fixed in Go 1.27)"
		else
			cat "$bin/out"
			# The input is written in this clone only: print it, so that a
			# CI log is enough to add it as a regression seed elsewhere.
			grep -o 'Failing input written to [^ ]*' "$bin/out" | cut -d' ' -f5 | while read -r f; do
				echo "fuzz: the failing input, $dir/$f (first 8 KB):"
				head -c 8192 "$dir/$f"
				echo
			done
			echo "fuzz: $importpath $target failed" >&2
			exit 1
		fi
		count=$((count + 1))
	done
done <<<"$listing"
echo "fuzz: $count targets passed in $((SECONDS - start)) s"
