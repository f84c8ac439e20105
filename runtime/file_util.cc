#include "runtime/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace relax::rt {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) rt_fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    rt_fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    rt_fail(path, ": not a regular file");
  }
  size_t size = size_t(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      rt_fail(path, ": cannot map ", size, " bytes: ", std::strerror(err));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<const MappedFile>(new MappedFile(data, size, path));
}

MappedFile::~MappedFile() {
  if (size_ > 0) munmap(const_cast<uint8_t*>(data_), size_);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  std::filesystem::path p(path_);
  std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  tmp_ = (dir / ("." + p.filename().string() + ".tmp-XXXXXX")).string();
  fd_ = mkstemp(tmp_.data());
  if (fd_ < 0) rt_fail(path_, ": cannot create a temporary file in ", dir.string(), ": ", std::strerror(errno));
  fchmod(fd_, 0644);  // mkstemp makes 0600; a package is an ordinary file
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) rt_fail(path_, ": write after commit");
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) rt_fail(path_, ": cannot write: ", std::strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= size_t(w);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) rt_fail(path_, ": committed twice");
  if (fsync(fd_) != 0) rt_fail(path_, ": cannot flush: ", std::strerror(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    int err = errno;
    ::unlink(tmp_.c_str());
    rt_fail(path_, ": cannot close: ", std::strerror(err));
  }
  fd_ = -1;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    rt_fail(path_, ": cannot rename the temporary file into place: ", std::strerror(err));
  }
  // Make the rename itself durable.
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) rt_fail("cannot create a temporary directory ", tmpl, ": ", std::strerror(errno));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void TempDir::child_env() const { setenv("TMPDIR", path_.c_str(), 1); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) rt_fail(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) rt_fail(path, ": cannot read");
  return std::move(ss).str();
}

}  // namespace relax::rt
