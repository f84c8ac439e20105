#include "ir/explain.h"

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

namespace relax {
namespace {

struct Topics {
  std::mutex mu;
  std::set<std::string> on;
  Topics() {
    if (const char* env = std::getenv("RELAX_EXPLAIN")) parse(env);
  }
  void parse(const std::string& list) {
    on.clear();
    std::istringstream words(list);
    for (std::string t; std::getline(words, t, ',');)
      if (!t.empty()) on.insert(t);
  }
};

Topics& topics() {
  static Topics t;
  return t;
}

}  // namespace

void set_explain(const std::string& list) {
  Topics& t = topics();
  std::lock_guard lock(t.mu);
  t.parse(list);
}

bool explaining(const std::string& topic) {
  Topics& t = topics();
  std::lock_guard lock(t.mu);
  return t.on.count("all") || t.on.count(topic);
}

void explain(const std::string& topic, const std::string& line) {
  if (explaining(topic)) std::cerr << "[" << topic << "] " << line << "\n";
}

}  // namespace relax
