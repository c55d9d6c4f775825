// stress/cyclictest.cpp — see cyclictest.hpp.
#include "cyclictest.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

namespace tickwheel::stress {
namespace {

constexpr int kHistogramUs = 100'000;

std::vector<std::string> arguments(std::int64_t tick_ns, int cpu, int rt_priority, bool mlock,
                                   const std::string& json) {
  std::vector<std::string> args{"cyclictest",
                                "-q",
                                "-t1",
                                "--laptop",
                                "-i" + std::to_string(std::max<std::int64_t>(1, tick_ns / 1000)),
                                "-h" + std::to_string(kHistogramUs),
                                "--histfile=/dev/null",
                                "--json=" + json};
  if (rt_priority > 0) {
    args.insert(args.end(), {"--policy=fifo", "-p" + std::to_string(rt_priority)});
  } else {
    args.emplace_back("--policy=other");
  }
  if (cpu >= 0) args.push_back("-a" + std::to_string(cpu));
  if (mlock) args.emplace_back("-m");
  return args;
}

// The first line cyclictest wrote that is not its notice about cpu_dma_latency.
std::string what_it_said(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.find("cpu_dma_latency") == std::string::npos) return line;
  }
  return "no message";
}

}  // namespace

Cyclictest::Cyclictest(std::int64_t tick_ns, int cpu, int rt_priority, bool mlock) {
  std::string dir = (std::filesystem::temp_directory_path() / "tickwheel-cyclictest-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    result_.reason = std::string("no temporary directory for its results: ") + std::strerror(errno);
    return;
  }
  dir_ = dir;
  args_ = arguments(tick_ns, cpu, rt_priority, mlock, dir_ + "/cyclictest.json");
  for (const std::string& a : args_) result_.command += (result_.command.empty() ? "" : " ") + a;
}

Cyclictest::~Cyclictest() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void Cyclictest::start() {
  if (dir_.empty()) return;
  std::vector<char*> argv;
  for (std::string& a : args_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = dir_ + "/output";
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  const int err = posix_spawnp(&pid_, "cyclictest", &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (err != 0) {
    pid_ = -1;
    result_.reason = err == ENOENT ? std::string("not installed (Debian: rt-tests)")
                                   : std::string("cannot start: ") + std::strerror(err);
  }
}

CyclictestResult Cyclictest::stop() {
  if (pid_ <= 0) return std::move(result_);
  kill(pid_, SIGINT);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    result_.reason = "refused or failed (exit status " +
                     std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) +
                     "): " + what_it_said(dir_ + "/output");
    return std::move(result_);
  }
  try {
    std::ifstream in(dir_ + "/cyclictest.json");
    const nlohmann::json thread = nlohmann::json::parse(in).at("thread").at("0");
    std::uint64_t counted = 0;
    for (const auto& [us, n] : thread.at("histogram").items()) {
      for (std::uint64_t i = 0; i < n.get<std::uint64_t>(); ++i)
        result_.latency.record(std::stoull(us) * 1000);
      counted += n.get<std::uint64_t>();
    }
    const auto cycles = thread.at("cycles").get<std::uint64_t>();
    result_.overflows = cycles > counted ? cycles - counted : 0;
    const auto max_ns = thread.at("max").get<std::uint64_t>() * 1000;
    for (std::uint64_t i = 0; i < result_.overflows; ++i) result_.latency.record(max_ns);
    result_.ran = true;
  } catch (const std::exception& e) {
    result_.reason = std::string("its results could not be read: ") + e.what();
  }
  return std::move(result_);
}

}  // namespace tickwheel::stress
