// stress/format.hpp — printf into a std::string, for the report and the plot. Not a hot path.
#pragma once

#include <string>

namespace tickwheel::stress {

// The text std::printf(fmt, ...) would print, whatever its length.
[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...);

}  // namespace tickwheel::stress
