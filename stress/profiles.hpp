// stress/profiles.hpp — the named workloads (--profile): each is a short list of changes to the
// `default` profile, which is Options' own member initialisers. An option given on the command line
// overrides the profile's value (options.cpp applies a profile only to options not given).
#pragma once

#include <span>
#include <string_view>

#include "options.hpp"

namespace tickwheel::stress {

struct Profile {
  std::string_view name;
  std::string_view summary;   // one line for --help and the report
  void (*apply)(Options& o);  // changes from the defaults
};

// Every profile, `default` first.
std::span<const Profile> profiles() noexcept;
// The profile of that name, or nullptr.
const Profile* find_profile(std::string_view name) noexcept;

}  // namespace tickwheel::stress
