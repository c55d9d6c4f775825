// engine/platform/log.hpp — the default sink of the library's one-line notices: standard error. Used where
// EngineOptions::log or ThreadPoolOptions::log is left empty.
#pragma once

#include <cstdio>
#include <string_view>

namespace tickwheel::detail {

// One line to stderr, unbuffered as stderr is. A failed write is ignored: a notice is never worth
// an error of its own.
inline void log_to_stderr(std::string_view line) noexcept {
  (void)std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
}

}  // namespace tickwheel::detail
