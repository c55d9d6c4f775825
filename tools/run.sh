#!/usr/bin/env bash
# tools/run.sh — the one entry point. On a fresh Debian 12 machine (as root) it installs the Debian
# packages the build needs, only those missing, then builds and runs what was asked for.
#
#   tools/run.sh test      Release build under build/, then the whole CTest suite; extra arguments go
#                          to ctest, e.g. `tools/run.sh test -L unit` (labels: unit, model,
#                          concurrency, slow, compile_fail, package, readme, fuzz, stress, tools,
#                          gateway)
#   tools/run.sh stress    Release build, then the stress harness with its default profile
#                          (extra arguments go to tickwheel-stress; try --help)
#   tools/run.sh bench     Release build, then both benchmark binaries, the Wheel's (tickwheel-bench)
#                          then the Engine's (tickwheel-engine-bench); extra arguments go to each
#   tools/run.sh check     the whole CTest suite under AddressSanitizer + UBSan (Debug, build-asan/)
#                          and under ThreadSanitizer (build-tsan/)
#   tools/run.sh build     Release build only
#   tools/run.sh gateway   Release build of the reference gateway (examples/gateway/, build-gateway/,
#                          jemalloc off as by default), then tickwheel
#                          (caller-driven loops; workers + LoopExecutor) and Boost.Asio side by side
#                          under the same load: requests/s, timeout lateness, CPU per request, RSS and
#                          the correctness counts (non-zero exit on any violation), a JSON report and
#                          an SVG in build/gateway-report/; extra arguments go to run_gateway.py, e.g.
#                          `tools/run.sh gateway --runs 3` (medians of 3 interleaved runs; --help)
#   tools/run.sh fuzz [s]  the libFuzzer targets (clang, ASan + UBSan, build-fuzz/), each for s seconds
#                          (60 by default) over a scratch copy of its seed corpus; an input that fails
#                          is kept in tests/fuzz/regressions/<target>/ (then replayed by CTest) and the
#                          run exits non-zero
#   tools/run.sh soak [m]  Release build, then tools/soak.py: the stress harness back to back for m
#                          minutes (10 by default) with random profiles and engine options, each
#                          run's exactly-once accounting checked; exits non-zero on any violation
#   tools/run.sh format    apply .clang-format to every C++ file of the tree;
#                          with --check, change nothing and fail naming each file that is off
#   tools/run.sh tidy      clang-tidy (.clang-tidy) over the library: every engine/*/*.cpp, a unit that
#                          includes every public header, and memory.cpp once more without jemalloc
#                          (build-tidy/); any finding fails the run
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
packages=(cmake ninja-build g++ pkg-config python3 libgtest-dev libbenchmark-dev libconcurrentqueue-dev
          libjemalloc-dev libhwloc-dev libcli11-dev libboost-dev nlohmann-json3-dev zlib1g-dev python3-matplotlib
          rt-tests)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "tools/run.sh: installing missing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Configures through a preset of CMakePresets.json, every time: a second when nothing changed, and
# a changed preset (flags, options) reaches the cache instead of being ignored by an old build
# directory. Its output is shown only when it fails.
configure() {
  local preset=$1 log
  log=$(mktemp)
  if ! (cd "$root" && cmake --preset "$preset") >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    echo "tools/run.sh: configuring the '$preset' preset FAILED (output above)"
    exit 1
  fi
  rm -f "$log"
}

# The release preset (jemalloc on, off by default in CMakeLists.txt, so that its path is what CI
# tests), built.
configure_and_build() {
  install_missing
  configure release
  (cd "$root" && cmake --build --preset release --parallel "$(nproc)")
}

# A sanitizer preset (the library and its tests, no benchmarks), built, then the whole suite.
sanitized_suite() {
  local preset=$1
  install_missing
  configure "$preset"
  (cd "$root" && cmake --build --preset "$preset" --parallel "$(nproc)")
  (cd "$root" && ctest --preset "$preset" --parallel "$(nproc)")
}

# The libFuzzer targets of tests/fuzz/, each run for $1 seconds. The fuzzer grows a scratch copy of
# the seed corpus, so the committed one stays as it is; it also reads the kept regressions.
# -timeout: one input running that long is a hang; the flags are those of the `fuzz` preset.
fuzz_targets() {
  local seconds=${1:-60} dir="$root/build-fuzz" failed=0
  packages+=(clang libclang-rt-14-dev)  # clang++ and its libFuzzer and sanitizer runtimes
  install_missing
  configure fuzz
  (cd "$root" && cmake --build --preset fuzz --parallel "$(nproc)" --target tickwheel-fuzz-wheel tickwheel-fuzz-engine)
  for target in wheel engine; do
    local work kept="$root/tests/fuzz/regressions/$target"
    work=$(mktemp -d)
    cp -r "$root/tests/fuzz/corpus/$target" "$work/corpus"
    mkdir "$work/out"
    local seeds=("$work/corpus")
    [ -d "$kept" ] && seeds+=("$kept")
    echo "tools/run.sh: fuzzing $target for ${seconds}s"
    if ! "$dir/tests/fuzz/tickwheel-fuzz-$target" -max_total_time="$seconds" -timeout=25 -max_len=4096 \
        -len_control=20 -print_final_stats=1 -artifact_prefix="$work/out/" "${seeds[@]}"; then
      failed=1
      mkdir -p "$kept"
      for f in "$work"/out/crash-* "$work"/out/leak-* "$work"/out/timeout-* "$work"/out/oom-*; do
        [ -f "$f" ] || continue
        cp "$f" "$kept/"
        echo "tools/run.sh: the $target fuzzer FAILED on an input, kept as tests/fuzz/regressions/$target/$(basename "$f")"
        echo "  replay it: TICKWHEEL_FUZZ_TRACE=1 $dir/tests/fuzz/tickwheel-fuzz-$target $kept/$(basename "$f")"
      done
    fi
    rm -rf "$work"
  done
  return $failed
}

# Every C++ source and header of the project (not build outputs).
cxx_files() {
  find "$root/include" "$root/engine" "$root/bench" "$root/stress" "$root/tests" "$root/tools" "$root/examples" \
    -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) | sort
}

format_tree() {
  packages+=(clang-format)
  install_missing
  if [ "${1:-}" = "--check" ]; then
    local off=()
    while IFS= read -r f; do
      clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || off+=("${f#"$root"/}")
    done < <(cxx_files)
    if [ ${#off[@]} -gt 0 ]; then
      echo "tools/run.sh: not in the house format (fix with tools/run.sh format):"
      printf '  %s\n' "${off[@]}"
      return 1
    fi
    echo "tools/run.sh: every C++ file is in the house format"
  else
    cxx_files | xargs clang-format -i
  fi
}

# clang-tidy over the library. The compile database holds only the library's sources and the
# TICKWHEEL_TIDY unit that includes every public header (tests, benchmarks and tools are off), so
# each header is checked, as the .clang-tidy header filter allows, whether or not a source includes
# it. Configured on every run (a second): that unit's header list is globbed at configure time.
# Debug, so that assertions stay in what clang-tidy reads.
tidy_tree() {
  local dir="$root/build-tidy"
  packages+=(clang clang-tidy)  # clang++ writes the compile commands that clang-tidy 14 parses
  install_missing
  configure tidy
  local failed=0
  run-clang-tidy -p "$dir" -j "$(nproc)" -quiet || failed=1
  # The other branch of memory.cpp: the library as built without jemalloc (the default).
  clang-tidy -p "$dir" --quiet --extra-arg=-UTICKWHEEL_HAVE_JEMALLOC "$root/engine/wheel/memory.cpp" || failed=1
  if [ $failed -ne 0 ]; then
    echo "tools/run.sh: clang-tidy FAILED: fix each finding above (see .clang-tidy)"
    return 1
  fi
  echo "tools/run.sh: clang-tidy found nothing"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  test)
    configure_and_build
    (cd "$root" && ctest --preset release --parallel "$(nproc)" "$@")
    ;;
  stress)
    configure_and_build
    exec "$build/stress/tickwheel-stress" "$@"
    ;;
  bench)
    configure_and_build
    "$build/bench/tickwheel-bench" "$@"
    exec "$build/bench/tickwheel-engine-bench" "$@"
    ;;
  build)
    configure_and_build
    ;;
  gateway)
    # Built as a user builds the library by default (its own preset: jemalloc off), so that the
    # gateway's allocator and memory are the ones Asio's binary has too.
    install_missing
    configure gateway
    (cd "$root" && cmake --build --preset gateway --parallel "$(nproc)")
    gw="$root/build-gateway/examples/gateway"
    exec python3 "$root/examples/gateway/run_gateway.py" --server "$gw/tickwheel-gateway" \
      --load "$gw/tickwheel-gateway-load" --asio "$gw/tickwheel-gateway-asio" \
      --asio-tickwheel "$gw/tickwheel-gateway-asio-tickwheel" --out "$build/gateway-report" "$@"
    ;;
  check)
    sanitized_suite asan
    sanitized_suite tsan
    ;;
  fuzz)
    fuzz_targets "${1:-60}"
    ;;
  soak)
    configure_and_build
    exec python3 "$root/tools/soak.py" "$build/stress/tickwheel-stress" --minutes "${1:-10}" \
      --keep "$build/soak-failures" "${@:2}"
    ;;
  format)
    format_tree "$@"
    ;;
  tidy)
    tidy_tree
    ;;
  *)
    sed -n '2,/^[^#]/p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'
    exit 2
    ;;
esac
