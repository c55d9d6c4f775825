// tests/fuzz/replay_main.cpp — runs a fuzz target's LLVMFuzzerTestOneInput over saved inputs, so
// that every committed corpus and crash input is a regression test in every build (any compiler,
// no libFuzzer needed). A target reports a failure by aborting, which fails the test.
//
//   tickwheel-fuzz-<target>-replay CORPUS_DIR [--optional DIR]...
//
// CORPUS_DIR must exist and hold at least one input (an empty corpus would make the test pass
// without replaying anything). A directory after --optional may be missing or empty: it is where
// crash inputs are kept once there are any (tests/fuzz/regressions/<target>/). Files are replayed
// in name order, each named before it runs, so a failure says which input it was.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

bool collect(const fs::path& dir, bool optional, std::vector<fs::path>& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (optional) return true;
    std::fprintf(stderr, "replay: %s is not a directory\n", dir.c_str());
    return false;
  }
  const std::size_t before = out.size();
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
  if (!optional && out.size() == before) {
    std::fprintf(stderr, "replay: no inputs in %s\n", dir.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  bool ok = argc >= 2;
  for (int i = 1; i < argc && ok; ++i) {
    if (std::string_view(argv[i]) == "--optional" && i + 1 < argc) {
      ok = collect(argv[++i], /*optional=*/true, inputs);
    } else {
      ok = collect(argv[i], /*optional=*/false, inputs);
    }
  }
  if (!ok) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [--optional DIR]...\n", argv[0]);
    return 2;
  }
  for (const fs::path& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!f.good() && !f.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
      return 2;
    }
    std::printf("replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs, all passed\n", inputs.size());
  return 0;
}
