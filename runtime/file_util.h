// Files for the runtime: read-only mappings (packages, weights) and atomic
// writes (packages, .npy), so a reader never sees half a file and a failed
// write leaves nothing behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace relax::rt {

// A whole file mapped read-only (private). An empty file maps to an empty
// span.
class MappedFile {
 public:
  // Throws rt::Error naming the path when it cannot be opened or mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(const uint8_t* data, size_t size, std::string path) : data_(data), size_(size), path_(std::move(path)) {}
  const uint8_t* data_;
  size_t size_;
  std::string path_;
};

// Writes `path` atomically: the bytes go to a temporary file in the same
// directory, which commit() flushes to disk (fsync) and renames over `path`.
// Destroyed without commit() (an exception on the way), it removes the
// temporary file.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  void commit();

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
};

// A private directory under the temporary directory ($TMPDIR, else /tmp),
// named PREFIX-XXXXXX, removed with everything in it when destroyed. A
// process that runs children gives each one a TempDir as its $TMPDIR
// (child_env) and removes it once the child is reaped: what a child that
// crashed or was killed left there goes with it.
class TempDir {
 public:
  // Throws rt::Error when the directory cannot be made.
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // In a forked child: makes this directory the child's $TMPDIR.
  void child_env() const;

 private:
  std::string path_;
};

// The whole file; throws rt::Error naming the path.
std::string read_file(const std::string& path);

}  // namespace relax::rt
