#!/usr/bin/env bash
# The host code under AddressSanitizer and UndefinedBehaviorSanitizer, CPU only: a clang build in
# ${SAN_BUILD_DIR:-build-san} (no CUDA, no cuDNN) that runs the CPU test suite (CTest label "cpu"), then each
# libFuzzer target of tests/fuzz on its seed corpus for ${FUZZ_SECONDS:-20} s (every input must end in success or
# a usage error). `scripts/sanitize-cpu.sh tests` or `fuzz` does one part.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${SAN_BUILD_DIR:-build-san}"
what="${1:-all}"
seconds="${FUZZ_SECONDS:-20}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link"
args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
      "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" -DATTNBENCH_CUDA=OFF -DATTNBENCH_HIP=OFF -DATTNBENCH_CUDNN=OFF -DATTNBENCH_TESTS=ON
      -DATTNBENCH_FUZZ=ON)
[ -d .deps/usr ] && args+=(-DCMAKE_PREFIX_PATH="$PWD/.deps/usr")
cmake "${args[@]}" >/dev/null
targets=()
[ "$what" = fuzz ] && targets=(--target fuzz_shapes fuzz_results fuzz_cli)
cmake --build "$build" -j "$(nproc)" "${targets[@]}"

if [ "$what" = all ] || [ "$what" = tests ]; then
  # The planted-bug matrices (forward, features, gradients, the gated block's backward; the local bugs' and the
  # wide scores' too) run the Eigen reference over long caches; unoptimised under ASan they are the suite's slowest
  # tests by far (one gradient row took 640 s) and check the gate's numbers, not memory safety: they keep to the
  # Release suite.
  ctest --test-dir "$build" -L cpu -j "$(nproc)" --output-on-failure --timeout 900 \
        -E '^(Shapes/(GateMatrix|GatedGateMatrix|GateFeatures|GradientGateMatrix|GatedBwdBugMatrix)|Shapes/LocalBugs|WideScores)\.'
fi

if [ "$what" = all ] || [ "$what" = fuzz ]; then
  root="$PWD"
  for t in fuzz_shapes fuzz_results fuzz_cli; do
    # New inputs go to a scratch corpus in the build folder; the seeds in tests/fuzz/corpus are only read.
    mkdir -p "$build/fuzz-corpus/$t"
    echo "fuzz: $t for ${seconds} s"
    (cd "$build" && "./tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -print_final_stats=1 "fuzz-corpus/$t" "$root/tests/fuzz/corpus/$t" > "fuzz-$t.log" 2>&1) ||
      { tail -n 40 "$build/fuzz-$t.log"; echo "fuzz: $t found an input that fails (above)"; exit 1; }
    grep -E "^(stat::number_of_executed_units|Done )" "$build/fuzz-$t.log" || tail -n 3 "$build/fuzz-$t.log"
  done
fi
