// What the counting operator new of counting_new.cpp has counted: successful calls of every
// variant, by every thread, since the process began. Only in executables that link
// counting_new.cpp.
#pragma once

#include <cstdint>

namespace tickwheel::test {
std::uint64_t news();
}  // namespace tickwheel::test
