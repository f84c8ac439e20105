// The ONNX backend test data as a list of cases, and running one case in a
// child process so that a crash or a hang is reported as such: shared by
// onnx-import-report and onnx-conformance.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace relax::conformance {

struct Case {
  std::string name;    // "node/test_abs"
  std::string folder;  // "node"
  std::string model;
  std::vector<std::string> inputs;   // input_K.pb, empty for light models
  std::vector<std::string> outputs;  // output_K.pb
};

struct Result {
  std::string status;
  std::string reason;
};

// Every case under `root` (node, simple, pytorch-converted,
// pytorch-operator, light), sorted by name within each folder.
std::vector<Case> find_cases(const std::string& root);

// The data set to use when none is given: ../shared/onnx-backend-tests
// beside the source tree, else Debian's libonnx-testdata. Sets the root, a
// description and the key that names its baseline file.
void default_dataset(const std::string& source_dir, std::string& root, std::string& description, std::string& key);

// Runs `fn` in a forked child with a time limit; a signal or a timeout
// becomes {"crash", why}.
Result run_isolated(const std::function<Result()>& fn, int timeout_s);

// The time limit of one case: `timeout_s`, four times that for the light
// models (whole networks at 224x224, VGG-19 among them, where a node case
// is one operator on a few elements).
int case_timeout(const Case& c, int timeout_s);

// Runs every case through `fn`, up to `jobs` children at a time, each within
// case_timeout; calls `done` in the parent as each finishes (in completion
// order).
void run_all(const std::vector<Case>& cases, const std::function<Result(const Case&)>& fn, int timeout_s, int jobs,
             const std::function<void(const Case&, const Result&)>& done);

// "name status" lines ('#' comments); a missing status reads as `def`.
std::map<std::string, std::string> read_baseline(const std::string& path, const std::string& def);

// The readable summary: one row per folder and one for all, a column per
// status, then a total.
std::string summary_table(const std::string& title, const std::vector<Case>& cases,
                          const std::map<std::string, Result>& results, const std::vector<std::string>& statuses);

// Writes the JSON report: `header` plus per-status totals and every case.
void write_json(const std::string& path, nlohmann::ordered_json header, const std::vector<std::string>& statuses,
                const std::map<std::string, Result>& results);

// The ratchet. `baseline` is a file, or a folder holding `file_name`
// (absent: nothing to check, said so). A case listed there whose status now
// ranks worse than its listed one (lower rank is better; a missing status
// reads as `def`) is a regression; each is printed. Returns their count.
int check_baseline(std::string baseline, const std::string& file_name, const std::map<std::string, Result>& results,
                   const std::string& def, const std::function<int(const std::string&)>& rank);

std::string first_line(const std::string& s);

}  // namespace relax::conformance
