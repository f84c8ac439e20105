// The runtime's one exception type. Everything the runtime refuses (a
// damaged package, a bad input shape, a kernel that failed) is an rt::Error
// whose message says what and where, ready to show to a user.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace relax::rt {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates its arguments with operator<< ("x", 3, "y" -> "x3y").
template <class... Args>
std::string rt_str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Throws rt::Error with the concatenation of its arguments.
template <class... Args>
[[noreturn]] void rt_fail(const Args&... args) {
  throw Error(rt_str(args...));
}

}  // namespace relax::rt
