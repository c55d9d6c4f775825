#!/usr/bin/env bash
# tools/run.sh — the one entry point. On a fresh Debian 12 machine (as root) it installs the Debian
# packages the build needs, only those missing, then builds and runs what was asked for.
#
#   tools/run.sh test      Release build under build/, then the whole CTest suite
#   tools/run.sh stress    Release build, then the stress harness with its default profile
#                          (extra arguments go to tickwheel-stress; try --help)
#   tools/run.sh bench     Release build, then the benchmarks (extra arguments go to Google Benchmark)
#   tools/run.sh check     the whole CTest suite under AddressSanitizer + UBSan (Debug, build-asan/)
#                          and under ThreadSanitizer (build-tsan/)
#   tools/run.sh build     Release build only
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
packages=(cmake ninja-build g++ pkg-config python3 libgtest-dev libbenchmark-dev libconcurrentqueue-dev
          libjemalloc-dev libhwloc-dev libcli11-dev)

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

configure_and_build() {
  install_missing
  if [ ! -f "$build/build.ninja" ]; then
    # jemalloc on here (off by default, see CMakeLists.txt) so that its path is what CI tests.
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTICKWHEEL_WITH_JEMALLOC=ON >/dev/null
  fi
  cmake --build "$build" --parallel "$(nproc)"
}

# A sanitizer build of the library and its tests (no benchmarks), then the whole suite.
sanitized_suite() {
  local dir=$1 type=$2 flags=$3
  install_missing
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DCMAKE_CXX_FLAGS="$flags" \
      -DTICKWHEEL_BUILD_BENCH=OFF >/dev/null
  fi
  cmake --build "$dir" --parallel "$(nproc)"
  ctest --test-dir "$dir" --output-on-failure --parallel "$(nproc)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  test)
    configure_and_build
    ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)" "$@"
    ;;
  stress)
    configure_and_build
    exec "$build/stress/tickwheel-stress" "$@"
    ;;
  bench)
    configure_and_build
    exec "$build/bench/tickwheel-bench" "$@"
    ;;
  build)
    configure_and_build
    ;;
  check)
    sanitized_suite "$root/build-asan" Debug \
      "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    sanitized_suite "$root/build-tsan" RelWithDebInfo "-fsanitize=thread -g"
    ;;
  *)
    sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
