#include "runtime/package.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <functional>

#include "runtime/error.h"
#include "runtime/file_util.h"

namespace relax::rt {
namespace {

static_assert(std::endian::native == std::endian::little, "the package format is little-endian");

constexpr char kMagic[8] = {'R', 'E', 'L', 'A', 'X', 'P', 'K', 'G'};
constexpr uint64_t kP1 = 0x9e3779b185ebca87ull;
constexpr uint64_t kP2 = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kP3 = 0x165667b19e3779f9ull;

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t step(uint64_t lane, uint64_t word) { return std::rotl(lane ^ (word * kP1), 31) * kP2; }
// A bijective finaliser (xor-shifts and odd multiplies).
inline uint64_t fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

void Checksum64::block(const uint8_t* p) {
  lanes_[0] = step(lanes_[0], load64(p));
  lanes_[1] = step(lanes_[1], load64(p + 8));
  lanes_[2] = step(lanes_[2], load64(p + 16));
  lanes_[3] = step(lanes_[3], load64(p + 24));
}

void Checksum64::update(const void* data, size_t n) {
  if (n == 0) return;  // an empty section's data() may be null, which memcpy may not take
  auto* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (buffered_ > 0) {
    size_t take = std::min(n, sizeof(buf_) - buffered_);
    std::memcpy(buf_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < sizeof(buf_)) return;
    block(buf_);
    buffered_ = 0;
  }
  for (; n >= 32; p += 32, n -= 32) block(p);
  std::memcpy(buf_, p, n);
  buffered_ = n;
}

uint64_t Checksum64::finish() const {
  uint64_t lanes[4] = {lanes_[0], lanes_[1], lanes_[2], lanes_[3]};
  // The buffered words go to lanes 0, 1, 2 in order; a partial last word is
  // zero-padded.
  for (size_t i = 0; i * 8 < buffered_; ++i) {
    uint8_t word[8] = {};
    std::memcpy(word, buf_ + i * 8, std::min<size_t>(8, buffered_ - i * 8));
    lanes[i] = step(lanes[i], load64(word));
  }
  uint64_t h = total_ * kP3;
  for (uint64_t lane : lanes) h = std::rotl(h ^ fmix(lane), 27) * kP1;
  return fmix(h);
}

uint64_t checksum64(const void* data, size_t n) {
  Checksum64 c;
  c.update(data, n);
  return c.finish();
}

std::string checksum64_hex(const void* data, size_t n) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(checksum64(data, n)));
  return hex;
}

void PackageWriter::add(std::string name, std::string bytes, size_t alignment) {
  if (name.empty() || name.size() > kPackageNameSize)
    rt_fail("package section name '", name, "' must have 1 to ", kPackageNameSize, " bytes");
  for (const Section& s : sections_)
    if (s.name == name) rt_fail("package section '", name, "' added twice");
  if (alignment == 0) alignment = name == "weights" ? 4096 : 64;
  if (alignment < 64) alignment = 64;
  if (!std::has_single_bit(alignment))
    rt_fail("package section '", name, "': alignment ", alignment, " is not a power of two");
  sections_.push_back({std::move(name), std::move(bytes), alignment, {}, 1});
}

void PackageWriter::add(std::string name, std::span<const uint8_t> bytes, size_t alignment) {
  add(std::move(name), std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), alignment);
}

std::vector<size_t> PackageWriter::parts_offsets(const std::vector<std::span<const uint8_t>>& parts,
                                                 size_t part_alignment) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const auto& p : parts) {
    at = align_up(at, part_alignment);
    offsets.push_back(at);
    at += p.size();
  }
  return offsets;
}

void PackageWriter::add_parts(std::string name, std::vector<std::span<const uint8_t>> parts, size_t part_alignment,
                              size_t alignment) {
  if (part_alignment == 0 || !std::has_single_bit(part_alignment))
    rt_fail("package section '", name, "': part alignment ", part_alignment, " is not a power of two");
  add(std::move(name), std::string(), alignment);
  sections_.back().parts = std::move(parts);
  sections_.back().part_alignment = part_alignment;
}

size_t PackageWriter::Section::size() const {
  if (parts.empty()) return bytes.size();
  return parts_offsets(parts, part_alignment).back() + parts.back().size();
}

void PackageWriter::write(const std::string& path) const {
  AtomicFile out(path);
  emit([&](const void* p, size_t n) { out.write(p, n); });
  out.commit();
}

std::string PackageWriter::bytes() const {
  std::string out;
  emit([&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

void PackageWriter::emit(const std::function<void(const void*, size_t)>& sink) const {
  // Lay the file out first: the header records every offset and the size.
  size_t cursor = kPackageHeaderSize + sections_.size() * kPackageEntrySize;
  std::vector<size_t> offsets;
  for (const Section& s : sections_) {
    cursor = align_up(cursor, s.alignment);
    offsets.push_back(cursor);
    cursor += s.size();
  }
  size_t body_end = align_up(cursor, 8);
  uint64_t file_size = body_end + 8;

  std::string header(kPackageHeaderSize + sections_.size() * kPackageEntrySize, '\0');
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(header.data() + at, &v, 4); };
  auto put64 = [&](size_t at, uint64_t v) { std::memcpy(header.data() + at, &v, 8); };
  std::memcpy(header.data(), kMagic, 8);
  put32(8, kPackageVersion);
  put32(12, uint32_t(sections_.size()));
  put64(16, file_size);
  for (size_t i = 0; i < sections_.size(); ++i) {
    size_t at = kPackageHeaderSize + i * kPackageEntrySize;
    std::memcpy(header.data() + at, sections_[i].name.data(), sections_[i].name.size());
    put64(at + 24, offsets[i]);
    put64(at + 32, sections_[i].size());
  }

  Checksum64 sum;
  size_t written = 0;
  auto put = [&](const void* p, size_t n) {
    sink(p, n);
    sum.update(p, n);
    written += n;
  };
  static const char kZeros[4096] = {};
  auto pad_to = [&](size_t at) {
    while (written < at) put(kZeros, std::min(sizeof(kZeros), at - written));
  };
  put(header.data(), header.size());
  for (size_t i = 0; i < sections_.size(); ++i) {
    pad_to(offsets[i]);
    const Section& s = sections_[i];
    if (s.parts.empty()) {
      put(s.bytes.data(), s.bytes.size());
      continue;
    }
    std::vector<size_t> at = parts_offsets(s.parts, s.part_alignment);
    for (size_t k = 0; k < s.parts.size(); ++k) {
      pad_to(offsets[i] + at[k]);
      put(s.parts[k].data(), s.parts[k].size());
    }
  }
  pad_to(body_end);
  uint64_t checksum = sum.finish();
  sink(&checksum, 8);
}

Package Package::open(const std::string& path, bool verify_checksum) {
  Package pkg;
  pkg.file_ = MappedFile::open(path);
  std::span<const uint8_t> b = pkg.file_->bytes();
  const uint64_t have = b.size();
  auto fail = [&](const auto&... what) { rt_fail(path, ": ", what...); };

  if (have < 8 || std::memcmp(b.data(), kMagic, 8) != 0) fail("not a relax package (bad magic)");
  if (have < kPackageHeaderSize + 8)
    fail("truncated: the header needs ", kPackageHeaderSize + 8, " bytes, file has ", have);
  uint32_t version = load32(b.data() + 8);
  if (version > kPackageVersion)
    fail("format version ", version, " is newer than this runtime (", kPackageVersion, ")");
  if (version == 0) fail("format version 0 is not valid");
  uint64_t recorded = load64(b.data() + 16);
  if (recorded > have) fail("truncated: header says ", recorded, " bytes, file has ", have);
  if (recorded < have) fail("size mismatch: header says ", recorded, " bytes, file has ", have, " (trailing bytes)");
  const uint64_t body_end = have - 8;

  if (verify_checksum && checksum64(b.data(), body_end) != load64(b.data() + body_end))
    fail("checksum mismatch: the file is damaged");

  uint32_t count = load32(b.data() + 12);
  uint64_t table_end = kPackageHeaderSize + uint64_t(count) * kPackageEntrySize;
  if (table_end > body_end) fail("the section table (", count, " entries) does not fit in the file (", have, " bytes)");
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = b.data() + kPackageHeaderSize + size_t(i) * kPackageEntrySize;
    SectionInfo s;
    s.name.assign(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kPackageNameSize));
    s.offset = load64(e + 24);
    s.size = load64(e + 32);
    if (s.name.empty()) fail("section ", i, " has no name");
    if (s.offset < table_end || s.offset > body_end || s.size > body_end - s.offset)
      fail("section '", s.name, "' (offset ", s.offset, ", ", s.size, " bytes) points past the end of the file (", have,
           " bytes)");
    size_t alignment = s.name == "weights" ? 4096 : 64;
    if (s.offset % alignment != 0)
      fail("section '", s.name, "' at offset ", s.offset, " is not aligned to ", alignment);
    for (const SectionInfo& o : pkg.sections_) {
      if (o.name == s.name) fail("section '", s.name, "' appears twice");
      if (s.offset < o.offset + o.size && o.offset < s.offset + s.size)
        fail("sections '", o.name, "' and '", s.name, "' overlap");
    }
    pkg.sections_.push_back(std::move(s));
  }
  return pkg;
}

const std::string& Package::path() const { return file_->path(); }
uint64_t Package::file_size() const { return file_->bytes().size(); }

std::optional<std::span<const uint8_t>> Package::find(std::string_view name) const {
  for (const SectionInfo& s : sections_)
    if (s.name == name) return file_->bytes().subspan(s.offset, s.size);
  return std::nullopt;
}

std::span<const uint8_t> Package::section(std::string_view name) const {
  auto s = find(name);
  if (!s) rt_fail(path(), ": no section '", name, "'");
  return *s;
}

std::string_view Package::section_text(std::string_view name) const {
  auto s = section(name);
  return {reinterpret_cast<const char*>(s.data()), s.size()};
}

}  // namespace relax::rt
