#include "tools/batch_build.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "ir/error.h"
#include "runtime/file_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace relax::batch {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---- Finding the models ------------------------------------------------------

struct Job {
  std::string model;    // as the user named it (or found under a folder)
  std::string package;  // where its package goes
};

bool is_model_file(const fs::path& p) { return p.extension() == ".onnx"; }

std::vector<Job> find_jobs(const BatchOptions& o, const std::string& target) {
  std::vector<Job> jobs;
  std::set<std::string> seen;                     // canonical model paths
  std::map<std::string, std::string> package_of;  // package -> model, to find clashes
  auto add = [&](const fs::path& model, const fs::path& rel) {
    std::error_code ec;
    std::string canon = fs::weakly_canonical(model, ec).string();
    if (!seen.insert(ec ? model.string() : canon).second) return;
    fs::path pkg = o.out_dir.empty() ? model : fs::path(o.out_dir) / rel;
    pkg.replace_extension("." + target + ".rpkg");
    std::string key = fs::weakly_canonical(pkg, ec).string();
    if (auto it = package_of.find(key); it != package_of.end())
      fail("the models ", it->second, " and ", model.string(), " would both be built into ", pkg.string(),
           "; give them different names or build them into different folders");
    package_of[key] = model.string();
    jobs.push_back({model.string(), pkg.string()});
  };
  for (const std::string& in : o.inputs) {
    std::error_code ec;
    fs::file_status st = fs::status(in, ec);
    if (ec || !fs::exists(st)) fail(in, ": no such file or folder");
    if (fs::is_directory(st)) {
      std::vector<fs::path> found;
      for (fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
           !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec) && is_model_file(it->path())) found.push_back(it->path());
      if (ec) fail(in, ": cannot search the folder: ", ec.message());
      std::sort(found.begin(), found.end());
      for (const fs::path& f : found) add(f, f.lexically_relative(in));
    } else {
      add(fs::path(in), fs::path(in).filename());
    }
  }
  return jobs;
}

// ---- One child build -----------------------------------------------------

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out, err;
  Clock::time_point start;
  bool timed_out = false;
  // The child's $TMPDIR (the cpu backend's linker files): removed when the
  // child is done with, however it ended.
  std::unique_ptr<rt::TempDir> tmp;
};

volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

// The executable of this process, for the children.
std::string self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find this executable (/proc/self/exe): ", ec.message());
  return p.string();
}

Child spawn(const std::string& exe, const Job& job, const std::vector<std::string>& args, size_t index) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) fail("cannot create a pipe: ", std::strerror(errno));
  // The batch reads whatever is there without waiting.
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  std::vector<std::string> argv_s = {exe, job.model, "-o", job.package, "--json"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto tmp = std::make_unique<rt::TempDir>("relax-build");
  pid_t pid = fork();
  if (pid < 0) fail("cannot start a build process: ", std::strerror(errno));
  if (pid == 0) {
    // The child: its own process group (the batch decides when it stops),
    // stdin from /dev/null, stdout and stderr to the pipes.
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    tmp->child_env();
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  Child c;
  c.index = index;
  c.pid = pid;
  c.out_fd = out[0];
  c.err_fd = err[0];
  c.start = Clock::now();
  c.tmp = std::move(tmp);
  return c;
}

// Reads what is there; closes the descriptor at end of file.
void drain(int& fd, std::string& into) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, size_t(n));
      if (into.size() > (size_t(64) << 20)) into.erase(0, into.size() - (size_t(32) << 20));
      if (size_t(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && errno == EAGAIN) return;
    close(fd);
    fd = -1;
    return;
  }
}

// Removes the temporary files an atomic write of `package` may have left
// (AtomicFile: ".<name>.tmp-XXXXXX" beside it) when its writer was killed.
void remove_leftovers(const std::string& package) {
  fs::path p(package);
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::string prefix = "." + p.filename().string() + ".tmp-";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) fs::remove(it->path(), ec);
}

// The last `n` non-empty lines of `text`.
std::string tail_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > size_t(n) ? lines.size() - size_t(n) : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : "\n") + lines[i];
  return out;
}

// The report entry of a finished child.
json finish_child(const Child& c, int status, const Job& job, double timeout) {
  double seconds = since(c.start);
  json entry;
  bool parsed = false;
  if (WIFEXITED(status)) {
    try {
      entry = json::parse(c.out);
      parsed = entry.is_object() && entry.contains("status");
    } catch (const std::exception&) {
    }
  }
  if (c.timed_out) {
    entry = {{"status", "timeout"}, {"message", cat("stopped after ", timeout, " s (--timeout)")}};
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    std::string why = tail_lines(c.err, 3);
    entry = {{"status", "crash"},
             {"message", cat("the build crashed: signal ", sig, " (", strsignal(sig), ")",
                             why.empty() ? std::string() : ": " + why)},
             {"signal", sig}};
  } else if (!parsed) {
    std::string why = tail_lines(c.err, 3);
    entry = {{"status", "error"},
             {"message", cat("the build exited with status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                             " without a report", why.empty() ? std::string() : ": " + why)}};
  }
  entry["model"] = job.model;
  entry["package"] = job.package;
  entry["seconds"] = seconds;
  entry["up_to_date"] = false;
  if (entry["status"] != "ok") {
    // Neither a half-written package nor one from an earlier build of what
    // no longer builds.
    remove_leftovers(job.package);
    std::error_code ec;
    fs::remove(job.package, ec);
  }
  return entry;
}

// ---- Reports ---------------------------------------------------------------

const char* const kStatuses[] = {"ok", "unsupported", "error", "crash", "timeout"};

int exit_code_of(const json& models) {
  bool unsupported = false;
  for (const json& m : models) {
    std::string s = m.value("status", "error");
    if (s != "ok" && s != "unsupported") return 1;
    unsupported = unsupported || s == "unsupported";
  }
  return unsupported ? 2 : 0;
}

json summarize(const json& models) {
  json s;
  for (const char* k : kStatuses) s[k] = 0;
  s["total"] = models.size();
  s["up_to_date"] = 0;
  double build = 0;
  for (const json& m : models) {
    std::string st = m.value("status", "error");
    s[st] = s.value(st, 0) + 1;
    if (m.value("up_to_date", false)) s["up_to_date"] = s["up_to_date"].get<int>() + 1;
    build += m.value("seconds", 0.0);
  }
  s["build_seconds"] = build;
  s["exit_code"] = exit_code_of(models);
  return s;
}

// The first line of a message, at most `width` characters.
std::string one_line(std::string s, size_t width) {
  if (size_t nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl) + " ...";
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s;
}

// What to show for a model that did not build: its unsupported ops with
// their nodes, or the first line of its message (without the model's
// path, which the line already shows).
std::string reason(const json& m, size_t width) {
  std::string s;
  if (m.contains("unsupported") && m["unsupported"].is_array() && !m["unsupported"].empty()) {
    s = "unsupported:";
    for (const json& u : m["unsupported"]) {
      std::string nodes;
      for (const json& n : u.value("nodes", json::array())) nodes += (nodes.empty() ? "" : ", ") + n.get<std::string>();
      std::string domain = u.value("domain", "");
      s += " " + (domain.empty() ? "" : domain + ".") + u.value("op", "?") + " (" + nodes + ")";
    }
  } else {
    s = m.value("message", "");
    std::string prefix = m.value("model", "") + ": ";
    if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  }
  return one_line(s, width);
}

void print_summary(const json& report, std::ostream& os) {
  const json& s = report["summary"];
  os << "relax-build: " << s["total"].get<int>() << " model(s)";
  if (s.contains("seconds")) os << " in " << cat(int(s["seconds"].get<double>() * 10 + 0.5) / 10.0) << " s";
  os << "\n";
  for (const char* k : kStatuses) {
    int n = s.value(k, 0);
    os << "  " << std::left << std::setw(12) << k << std::right << std::setw(6) << n;
    if (std::string(k) == "ok" && s.value("up_to_date", 0) > 0)
      os << "  (" << s["up_to_date"].get<int>() << " up to date)";
    os << "\n";
  }
  bool header = false;
  for (const json& m : report["models"]) {
    std::string st = m.value("status", "error");
    if (st == "ok") continue;
    if (!header) os << "not built:\n";
    header = true;
    os << "  " << std::left << std::setw(12) << st << std::right << m.value("model", "?") << ": " << reason(m, 160)
       << "\n";
  }
}

void write_report(const json& report, const std::string& path) {
  rt::AtomicFile f(path);
  f.write(report.dump(2) + "\n");
  f.commit();
}

// ---- Progress --------------------------------------------------------------

class Progress {
 public:
  Progress(size_t total, bool quiet) : total_(total), quiet_(quiet), tty_(!quiet && isatty(2)) {}

  // A model finished (or was found up to date).
  void done(const json& entry) {
    ++done_;
    std::string st = entry.value("status", "error");
    if (st != "ok") ++failed_;
    if (quiet_) return;
    clear();
    std::string what = entry.value("up_to_date", false) ? "up to date" : st;
    std::ostringstream line;
    line << "[" << std::setw(int(std::to_string(total_).size())) << done_ << "/" << total_ << "] " << std::left
         << std::setw(11) << what << std::right << std::fixed << std::setprecision(1) << std::setw(7)
         << entry.value("seconds", 0.0) << " s  " << entry.value("model", "?");
    if (st == "ok")
      line << " -> " << entry.value("package", "");
    else
      line << ": " << reason(entry, 200);
    // On a terminal only failures stay on screen; elsewhere every model has its line.
    if (!tty_ || st != "ok") std::cerr << line.str() << "\n";
    std::cerr.flush();
  }

  // The status line (a terminal only): done/total, failures, elapsed, the models being built.
  void draw(const std::vector<std::string>& building, double elapsed) {
    if (!tty_) return;
    int secs = int(elapsed);
    std::ostringstream s;
    s << "[" << done_ << "/" << total_ << "] " << failed_ << " not built, " << secs / 60 << ":" << std::setw(2)
      << std::setfill('0') << secs % 60 << std::setfill(' ');
    if (!building.empty()) {
      s << "  building ";
      for (size_t i = 0; i < building.size(); ++i) {
        fs::path p(building[i]);  // its folder too: zoos name many models model.onnx
        s << (i ? ", " : "") << (p.parent_path().filename() / p.filename()).string();
      }
    }
    std::string line = s.str();
    struct winsize ws {};
    size_t width = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 ? ws.ws_col - 1 : 99;
    if (line.size() > width) line = line.substr(0, width);
    if (drawn_ && line == last_) return;
    std::cerr << "\r\x1b[K" << line << std::flush;
    drawn_ = true;
    last_ = line;
  }

  void clear() {
    if (drawn_) std::cerr << "\r\x1b[K" << std::flush;
    drawn_ = false;
  }

 private:
  size_t total_, done_ = 0, failed_ = 0;
  bool quiet_, tty_, drawn_ = false;
  std::string last_;
};

}  // namespace

std::pair<int, int> parse_shard(const std::string& s) {
  size_t slash = s.find('/');
  auto number = [&](const std::string& t) {
    if (t.empty() || t.size() > 6 || !std::all_of(t.begin(), t.end(), ::isdigit)) return -1;
    return std::stoi(t);
  };
  int k = slash == std::string::npos ? -1 : number(s.substr(0, slash));
  int n = slash == std::string::npos ? -1 : number(s.substr(slash + 1));
  if (k < 1 || n < 1 || k > n) fail("--shard: expected K/N with 1 <= K <= N, got '", s, "'");
  return {k, n};
}

int run_batch(const BatchOptions& o) {
  auto t0 = Clock::now();
  std::vector<Job> all = find_jobs(o, o.build.target);
  if (all.empty()) fail("no models (*.onnx) found in the inputs given");
  // Shard K of N: every N-th model of the sorted list, starting at the K-th.
  std::vector<Job> jobs;
  for (size_t i = 0; i < all.size(); ++i)
    if (int(i % size_t(o.shard_n)) == o.shard_k - 1) jobs.push_back(all[i]);
  int max_jobs = o.jobs > 0 ? o.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  for (const Job& j : jobs) {
    std::error_code ec;
    fs::path dir = fs::path(j.package).parent_path();
    if (!dir.empty()) fs::create_directories(dir, ec);
    if (ec) fail(j.package, ": cannot create its folder: ", ec.message());
  }

  json models = json::array();
  std::vector<json> entries(jobs.size());
  std::string exe = self_exe();
  Progress progress(jobs.size(), o.quiet);

  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_interrupted = 0;

  std::vector<Child> running;
  size_t next = 0;
  while ((next < jobs.size() || !running.empty()) && !g_interrupted) {
    while (running.size() < size_t(max_jobs) && next < jobs.size()) {
      size_t i = next++;
      if (!o.force && why_rebuild(jobs[i].model, jobs[i].package, o.build).empty()) {
        entries[i] = {{"model", jobs[i].model},
                      {"package", jobs[i].package},
                      {"status", "ok"},
                      {"up_to_date", true},
                      {"seconds", 0.0}};
        progress.done(entries[i]);
        continue;
      }
      running.push_back(spawn(exe, jobs[i], o.child_args, i));
    }
    std::vector<pollfd> fds;
    for (const Child& c : running) {
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
      if (c.err_fd >= 0) fds.push_back({c.err_fd, POLLIN, 0});
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 200);
    for (Child& c : running) {
      if (c.out_fd >= 0) drain(c.out_fd, c.out);
      if (c.err_fd >= 0) drain(c.err_fd, c.err);
      if (o.timeout > 0 && !c.timed_out && since(c.start) > o.timeout) {
        kill(-c.pid, SIGKILL);
        c.timed_out = true;
      }
    }
    std::vector<std::string> building;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      pid_t r = it->out_fd < 0 && it->err_fd < 0 ? waitpid(it->pid, &status, 0) : waitpid(it->pid, &status, WNOHANG);
      if (r == it->pid) {
        if (it->out_fd >= 0) drain(it->out_fd, it->out);
        if (it->err_fd >= 0) drain(it->err_fd, it->err);
        if (it->out_fd >= 0) close(it->out_fd);
        if (it->err_fd >= 0) close(it->err_fd);
        entries[it->index] = finish_child(*it, status, jobs[it->index], o.timeout);
        progress.done(entries[it->index]);
        it = running.erase(it);
      } else {
        building.push_back(jobs[it->index].model);
        ++it;
      }
    }
    progress.draw(building, since(t0));
  }
  progress.clear();
  bool interrupted = g_interrupted;
  if (interrupted) {
    // Stop the builds in flight and leave no temporary files behind.
    for (Child& c : running) {
      kill(-c.pid, SIGKILL);
      waitpid(c.pid, nullptr, 0);
      if (c.out_fd >= 0) close(c.out_fd);
      if (c.err_fd >= 0) close(c.err_fd);
      remove_leftovers(jobs[c.index].package);
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (interrupted) {
    std::cerr << "relax-build: interrupted; nothing reported\n";
    return 130;
  }

  for (json& e : entries) models.push_back(std::move(e));
  json report;
  report["relax_build"] = {{"compiler", std::string("relax ") + RELAX_VERSION},
                           {"target", o.build.target},
                           {"options", options_key(o.build)},
                           {"shard", cat(o.shard_k, "/", o.shard_n)},
                           {"jobs", max_jobs}};
  report["summary"] = summarize(models);
  report["summary"]["seconds"] = since(t0);
  report["models"] = std::move(models);
  if (!o.report_path.empty()) write_report(report, o.report_path);
  if (o.json) std::cout << report.dump(2) << "\n";
  if (!o.quiet) print_summary(report, std::cerr);
  return report["summary"]["exit_code"].get<int>();
}

int merge_reports(const std::vector<std::string>& paths, bool quiet) {
  json merged = json::array();
  std::map<std::string, size_t> where;  // model -> index in merged
  json header;
  for (const std::string& p : paths) {
    json r;
    try {
      r = json::parse(rt::read_file(p));
    } catch (const json::exception& e) {
      fail(p, ": not a relax-build report (", e.what(), ")");
    }
    if (!r.is_object() || !r.contains("models") || !r["models"].is_array())
      fail(p, ": not a relax-build report (no \"models\" list)");
    if (header.is_null() && r.contains("relax_build")) header = r["relax_build"];
    for (const json& m : r["models"]) {
      std::string name = m.value("model", "");
      if (auto it = where.find(name); it != where.end()) {
        std::cerr << "relax-build: " << name << " is in more than one report; the entry of " << p << " is kept\n";
        merged[it->second] = m;
        continue;
      }
      where[name] = merged.size();
      merged.push_back(m);
    }
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const json& a, const json& b) { return a.value("model", "") < b.value("model", ""); });
  json report;
  if (!header.is_null()) {
    header.erase("shard");
    header["merged"] = paths;
    report["relax_build"] = header;
  }
  report["summary"] = summarize(merged);
  report["models"] = std::move(merged);
  std::cout << report.dump(2) << "\n";
  if (!quiet) print_summary(report, std::cerr);
  return report["summary"]["exit_code"].get<int>();
}

}  // namespace relax::batch
