// The package file (`*.rpkg`, docs/runtime_abi.md section 3): named
// sections in one little-endian file,
//
//   0   char[8]  magic "RELAXPKG"
//   8   u32      format version (kPackageVersion)
//   12  u32      section count N
//   16  u64      file size in bytes
//   24  N x { char name[24] (NUL-padded); u64 offset; u64 size; }
//   ... sections at their offsets: "weights" aligned to 4096, others to 64
//   end-8: u64   checksum64 of bytes [0, size - 8)
//
// Package::open maps the file read-only and checks, in this order, the magic,
// the version, the recorded size, the checksum and the section table; a
// section is a span into the mapping, so weights are never copied.
//
// The checksum (checksum64) reads the data as little-endian 64-bit words and
// feeds word i to lane i % 4 of four independent 64-bit lanes:
//   lane = rotl(lane ^ (word * P1), 31) * P2        (P1, P2 odd)
// A trailing partial word is zero-padded. The result mixes the byte count and
// the four lanes (each through a bijective finaliser) into one word. Every
// step is a bijection of the lane for a fixed word and of the word for a
// fixed lane, so two inputs of the same length that differ within a single
// 8-byte word (in particular any one changed byte) always have different
// checksums. The four lanes run in parallel: several GB/s on one core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace relax::rt {

class MappedFile;

constexpr uint32_t kPackageVersion = 1;
constexpr size_t kPackageHeaderSize = 24;
constexpr size_t kPackageEntrySize = 40;
constexpr size_t kPackageNameSize = 24;

// The streaming form of checksum64: update() in any pieces gives the same
// result as one call over the concatenation.
class Checksum64 {
 public:
  void update(const void* data, size_t n);
  uint64_t finish() const;

 private:
  void block(const uint8_t* p);  // 32 bytes: one word per lane
  uint64_t lanes_[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull, 0x27d4eb2f165667c5ull};
  uint8_t buf_[32] = {};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

uint64_t checksum64(const void* data, size_t n);
// The same as 16 lowercase hex digits (the form packages record it in).
std::string checksum64_hex(const void* data, size_t n);

struct SectionInfo {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
};

class PackageWriter {
 public:
  // Adds a section. alignment 0: 4096 for "weights", 64 otherwise (never
  // less than 64; a power of two). Throws rt::Error on a duplicate name or a
  // name longer than 24 bytes.
  void add(std::string name, std::string bytes, size_t alignment = 0);
  void add(std::string name, std::span<const uint8_t> bytes, size_t alignment = 0);
  // Adds a section gathered from `parts`, not copied (they must outlive
  // write()): each part starts at the next multiple of `part_alignment`
  // from the section's start, zeros between. The offset of part i is
  // parts_offsets(parts, part_alignment)[i].
  void add_parts(std::string name, std::vector<std::span<const uint8_t>> parts, size_t part_alignment,
                 size_t alignment = 0);
  static std::vector<size_t> parts_offsets(const std::vector<std::span<const uint8_t>>& parts,
                                           size_t part_alignment);
  // Writes the package atomically (temporary file, fsync, rename).
  void write(const std::string& path) const;
  // The package's bytes, as write() would put them in the file.
  std::string bytes() const;

 private:
  void emit(const std::function<void(const void*, size_t)>& sink) const;
  struct Section {
    std::string name;
    std::string bytes;
    size_t alignment;
    std::vector<std::span<const uint8_t>> parts;  // instead of bytes, when gathered
    size_t part_alignment = 1;
    size_t size() const;
  };
  std::vector<Section> sections_;
};

class Package {
 public:
  // Maps and validates `path`; throws rt::Error "<path>: <what is wrong>".
  // verify_checksum = false skips reading every byte (a trusted file).
  static Package open(const std::string& path, bool verify_checksum = true);

  const std::string& path() const;
  uint64_t file_size() const;
  const std::vector<SectionInfo>& sections() const { return sections_; }
  bool has(std::string_view name) const { return find(name).has_value(); }
  // The bytes of a section, in the mapping; nullopt when absent.
  std::optional<std::span<const uint8_t>> find(std::string_view name) const;
  // The same, throwing rt::Error "<path>: no section 'name'" when absent.
  std::span<const uint8_t> section(std::string_view name) const;
  std::string_view section_text(std::string_view name) const;
  // Keeps the mapping alive: the owner for Storage::wrap of a weight.
  std::shared_ptr<const void> keep_alive() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<SectionInfo> sections_;
};

}  // namespace relax::rt
