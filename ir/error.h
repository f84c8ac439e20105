// Errors raised by the compiler. Every failure the user can cause (bad IR
// text, a shape mismatch, an unknown op) is a relax::Error carrying a message
// that names where it happened; internal invariants use RELAX_CHECK.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace relax {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Concatenates anything streamable into a string: cat("dim ", 3, " of x").
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace relax

#define RELAX_CHECK(cond, ...)                                                                                     \
  do {                                                                                                             \
    if (!(cond))                                                                                                   \
      ::relax::fail("internal error: ", __FILE__, ":", __LINE__, ": check '", #cond, "' failed. ", ##__VA_ARGS__); \
  } while (0)
