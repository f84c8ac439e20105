#include "tests/conformance/cases.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "runtime/file_util.h"

namespace fs = std::filesystem;

namespace relax::conformance {
namespace {

std::vector<std::string> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p.string());
  }
  return out;
}

// The child's side: run, write "status\treason" to `fd`, exit.
[[noreturn]] void child(const std::function<Result()>& fn, int fd, int timeout_s) {
  alarm(unsigned(timeout_s));
  Result r;
  try {
    r = fn();
  } catch (const std::exception& e) {
    r = {"crash", std::string("uncaught exception: ") + e.what()};
  }
  std::string msg = r.status + "\t" + r.reason;
  for (size_t off = 0; off < msg.size();) {
    ssize_t n = write(fd, msg.data() + off, msg.size() - off);
    if (n <= 0) break;
    off += size_t(n);
  }
  _exit(0);
}

Result parse_child(const std::string& msg, int status, int timeout_s) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {"crash", sig == SIGALRM ? "timed out after " + std::to_string(timeout_s) + " s"
                                    : "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")"};
  }
  size_t tab = msg.find('\t');
  if (tab == std::string::npos) return {"crash", "no result (exit status " + std::to_string(WEXITSTATUS(status)) + ")"};
  return {msg.substr(0, tab), msg.substr(tab + 1)};
}

}  // namespace

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::vector<Case> find_cases(const std::string& root_dir) {
  fs::path root(root_dir);
  std::vector<Case> cases;
  for (const char* folder : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
    if (!fs::is_directory(root / folder)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root / folder))
      if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& d : dirs) {
      fs::path data = d / "test_data_set_0";
      cases.push_back({std::string(folder) + "/" + d.filename().string(), folder, (d / "model.onnx").string(),
                       numbered(data, "input_"), numbered(data, "output_")});
    }
  }
  if (fs::is_directory(root / "light")) {
    std::vector<fs::path> models;
    for (const auto& e : fs::directory_iterator(root / "light"))
      if (e.path().extension() == ".onnx") models.push_back(e.path());
    std::sort(models.begin(), models.end());
    for (const fs::path& m : models) {
      std::string stem = m.stem().string();
      cases.push_back(
          {"light/" + stem, "light", m.string(), {}, {(root / "light" / (stem + "_output_0.pb")).string()}});
    }
  }
  return cases;
}

void default_dataset(const std::string& source_dir, std::string& root, std::string& description, std::string& key) {
  fs::path shared = fs::path(source_dir) / ".." / "shared" / "onnx-backend-tests";
  if (fs::is_directory(shared)) {
    root = shared.lexically_normal().string();
    description = "onnx-backend-tests (ONNX 1.23, ../shared)";
    key = "onnx-backend-tests";
  } else {
    root = "/usr/include/onnx/backend/test/data";
    description = "Debian libonnx-testdata (ONNX 1.12)";
    key = "libonnx-testdata";
  }
}

Result run_isolated(const std::function<Result()>& fn, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return {"crash", "pipe failed"};
  rt::TempDir tmp("relax-conformance");  // the child's $TMPDIR, removed however it ends
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    tmp.child_env();
    child(fn, fds[1], timeout_s);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return parse_child(msg, status, timeout_s);
}

int case_timeout(const Case& c, int timeout_s) { return c.folder == "light" ? 4 * timeout_s : timeout_s; }

void run_all(const std::vector<Case>& cases, const std::function<Result(const Case&)>& fn, int timeout_s, int jobs,
             const std::function<void(const Case&, const Result&)>& done) {
  struct Running {
    pid_t pid;
    int fd;
    size_t index;
    std::unique_ptr<rt::TempDir> tmp;  // the child's $TMPDIR, removed once it is reaped
    std::string msg;
    bool eof = false;
  };
  std::vector<Running> running;
  size_t next = 0;
  jobs = std::max(jobs, 1);
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && int(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
      const Case& c = cases[next];
      auto tmp = std::make_unique<rt::TempDir>("relax-conformance");
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        tmp->child_env();
        child([&] { return fn(c); }, fds[1], case_timeout(c, timeout_s));
      }
      close(fds[1]);
      running.push_back({pid, fds[0], next++, std::move(tmp), "", false});
    }
    // Read whatever the children wrote; reap those that closed their pipe.
    std::vector<pollfd> pfds;
    for (const Running& r : running) pfds.push_back({r.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), -1);
    for (size_t i = 0; i < running.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(running[i].fd, buf, sizeof buf);
      if (n > 0)
        running[i].msg.append(buf, size_t(n));
      else
        running[i].eof = true;
    }
    for (size_t i = 0; i < running.size();) {
      if (!running[i].eof) {
        ++i;
        continue;
      }
      int status = 0;
      waitpid(running[i].pid, &status, 0);
      close(running[i].fd);
      const Case& c = cases[running[i].index];
      done(c, parse_child(running[i].msg, status, case_timeout(c, timeout_s)));
      running.erase(running.begin() + long(i));
    }
  }
}

std::map<std::string, std::string> read_baseline(const std::string& path, const std::string& def) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::map<std::string, std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.find(' ');
    out[line.substr(0, sp)] = sp == std::string::npos ? def : line.substr(sp + 1);
  }
  return out;
}

std::string summary_table(const std::string& title, const std::vector<Case>& cases,
                          const std::map<std::string, Result>& results, const std::vector<std::string>& statuses) {
  std::map<std::string, std::map<std::string, int>> table;  // folder -> status -> count
  for (const Case& c : cases)
    if (auto it = results.find(c.name); it != results.end()) table[c.folder][it->second.status]++;
  std::ostringstream os;
  auto cell = [&](const char* fmt, auto v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    os << buf;
  };
  os << title << "\n";
  cell("%-20s", "folder");
  for (const std::string& st : statuses) cell(" %11s", st.c_str());
  os << "   total\n";
  std::map<std::string, int> total;
  for (const auto& [folder, counts] : table) {
    int n = 0;
    cell("%-20s", folder.c_str());
    for (const std::string& st : statuses) {
      int k = counts.count(st) ? counts.at(st) : 0;
      n += k;
      total[st] += k;
      cell(" %11d", k);
    }
    cell(" %7d\n", n);
  }
  cell("%-20s", "all");
  for (const std::string& st : statuses) cell(" %11d", total[st]);
  cell(" %7zu\n", results.size());
  return os.str();
}

void write_json(const std::string& path, nlohmann::ordered_json header, const std::vector<std::string>& statuses,
                const std::map<std::string, Result>& results) {
  std::map<std::string, int> total;
  for (const auto& [name, r] : results) total[r.status]++;
  for (const std::string& s : statuses) header["summary"][s] = total[s];
  for (const auto& [name, r] : results) header["cases"][name] = {{"status", r.status}, {"reason", r.reason}};
  std::ofstream(path) << header.dump(1) << "\n";
}

int check_baseline(std::string baseline, const std::string& file_name, const std::map<std::string, Result>& results,
                   const std::string& def, const std::function<int(const std::string&)>& rank) {
  if (fs::is_directory(baseline)) {
    baseline = (fs::path(baseline) / file_name).string();
    if (!fs::exists(baseline)) {
      std::cout << "baseline: none for this data set (" << baseline << ")\n";
      return 0;
    }
  }
  std::map<std::string, std::string> want = read_baseline(baseline, def);
  size_t absent = 0;
  std::vector<std::string> lost;
  for (const auto& [name, status] : want) {
    auto it = results.find(name);
    if (it == results.end()) {
      ++absent;
      continue;
    }
    if (rank(it->second.status) > rank(status))
      lost.push_back(name + ": was " + status + ", now " + it->second.status + " " + it->second.reason);
  }
  std::cout << "baseline: " << want.size() - absent - lost.size() << " of " << want.size() - absent
            << " baseline cases kept their status";
  if (absent) std::cout << " (" << absent << " not selected or not in this data set)";
  std::cout << "\n";
  for (const std::string& l : lost) std::cout << "REGRESSION  " << l << "\n";
  return int(lost.size());
}

}  // namespace relax::conformance
