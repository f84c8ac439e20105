// The package file: round trip, alignment, sections gathered from parts,
// and refusal of damaged files.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "runtime/model.h"
#include "runtime/package.h"
#include "runtime/tensor.h"
#include "tests/runtime/rt_test_util.h"

namespace relax::rt {
using test::contains;
using test::error_of;
using test::slurp;
using test::spit;
using test::TempDir;

namespace {

std::string weights_bytes() {
  std::string w(10000, '\0');
  for (size_t i = 0; i < w.size(); ++i) w[i] = char(i * 7 + 3);
  return w;
}

std::string write_sample(const TempDir& dir, const std::string& name = "model.rpkg") {
  PackageWriter w;
  w.add("manifest", std::string(R"({"format": 1})"));
  w.add("bytecode", std::string(100, 'b'));
  w.add("weights", weights_bytes());
  w.add("kernels.cpu", std::string(33, 'k'));
  std::string path = dir / name;
  w.write(path);
  return path;
}

void put64(std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
uint64_t get64(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
// Recomputes the checksum after an edit, so that only the edit is wrong.
void reseal(std::string& b) { put64(b, b.size() - 8, checksum64(b.data(), b.size() - 8)); }

}  // namespace

TEST_CASE("package: write and open round trip, weights aligned to 4096") {
  TempDir dir;
  std::string path = write_sample(dir);
  Package pkg = Package::open(path);
  CHECK(pkg.path() == path);
  CHECK(pkg.sections().size() == 4);
  CHECK(pkg.section_text("manifest") == R"({"format": 1})");
  CHECK(pkg.section_text("bytecode") == std::string(100, 'b'));
  CHECK(pkg.section_text("kernels.cpu") == std::string(33, 'k'));
  auto w = pkg.section("weights");
  CHECK(std::string(reinterpret_cast<const char*>(w.data()), w.size()) == weights_bytes());
  for (const SectionInfo& s : pkg.sections()) CHECK(s.offset % (s.name == "weights" ? 4096 : 64) == 0);
  CHECK(reinterpret_cast<uintptr_t>(w.data()) % 4096 == 0);  // zero copy: inside the page-aligned mapping
  CHECK(pkg.file_size() == std::filesystem::file_size(path));
  CHECK(pkg.file_size() % 8 == 0);
  CHECK(!pkg.has("nope"));
  CHECK(contains(error_of([&] { pkg.section("nope"); }), "no section 'nope'"));
  // Nothing but the package is left in the directory.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("package: a section gathered from parts equals the same bytes added whole") {
  TempDir dir;
  std::string a(100, 'a'), b(1, 'b'), c(130, 'c');
  std::vector<std::span<const uint8_t>> parts;
  for (const std::string* s : {&a, &b, &c}) parts.emplace_back(reinterpret_cast<const uint8_t*>(s->data()), s->size());
  std::vector<size_t> at = PackageWriter::parts_offsets(parts, 64);
  CHECK(at == std::vector<size_t>{0, 128, 192});
  std::string whole(192 + 130, '\0');
  whole.replace(0, 100, a).replace(128, 1, b).replace(192, 130, c);
  PackageWriter gathered, joined;
  for (PackageWriter* w : {&gathered, &joined}) w->add("manifest", std::string("{}"));
  gathered.add_parts("weights", parts, 64);
  joined.add("weights", whole);
  gathered.write(dir / "gathered.rpkg");
  joined.write(dir / "joined.rpkg");
  CHECK(slurp(dir / "gathered.rpkg") == slurp(dir / "joined.rpkg"));
  CHECK(Package::open(dir / "gathered.rpkg").section_text("weights") == whole);
}

TEST_CASE("package: a weight tensor over the mapping outlives the Package object") {
  TempDir dir;
  std::string path = write_sample(dir);
  Tensor t;
  {
    Package pkg = Package::open(path);
    auto w = pkg.section("weights");
    t = Tensor(Storage::wrap(w.data(), w.size(), pkg.keep_alive()), DType::u(8), {int64_t(w.size())});
  }
  std::filesystem::remove(path);
  CHECK(std::string(static_cast<const char*>(t.data()), t.nbytes()) == weights_bytes());
}

TEST_CASE("package: writer refuses bad names and leaves nothing behind on failure") {
  PackageWriter w;
  w.add("a", std::string("x"));
  CHECK(contains(error_of([&] { w.add("a", std::string("y")); }), "added twice"));
  CHECK(contains(error_of([&] { w.add(std::string(25, 'n'), std::string("y")); }), "1 to 24 bytes"));
  CHECK(contains(error_of([&] { w.add("b", std::string("y"), 100); }), "not a power of two"));
  CHECK(contains(error_of([&] { w.write("/nonexistent-dir/x.rpkg"); }), "/nonexistent-dir/x.rpkg"));
  // An empty package is still a package.
  TempDir dir;
  PackageWriter().write(dir / "empty.rpkg");
  CHECK(Package::open(dir / "empty.rpkg").sections().empty());
}

TEST_CASE("package: refuses damaged and foreign files, naming the file") {
  TempDir dir;
  const std::string good = slurp(write_sample(dir));
  const std::string path = dir / "bad.rpkg";
  auto open_bytes = [&](const std::string& bytes) {
    spit(path, bytes);
    return error_of([&] { Package::open(path); });
  };
  CHECK(open_bytes(good) == "<no error>");

  SUBCASE("truncated") {
    std::string msg = open_bytes(good.substr(0, good.size() / 2));
    CHECK(contains(msg, path + ": "));
    CHECK(contains(msg, "truncated: header says " + std::to_string(good.size()) + " bytes, file has " +
                            std::to_string(good.size() / 2)));
    CHECK(contains(open_bytes(good.substr(0, 20)), "truncated"));
    CHECK(contains(open_bytes(""), "not a relax package (bad magic)"));
    CHECK(contains(open_bytes(good + "extra..."), "trailing bytes"));
  }
  SUBCASE("bad magic") {
    std::string b = good;
    b[3] = 'Y';
    CHECK(contains(open_bytes(b), path + ": not a relax package (bad magic)"));
    CHECK(contains(open_bytes("hello world, this is not a package at all........"), "bad magic"));
  }
  SUBCASE("newer version") {
    std::string b = good;
    b[8] = 7;
    reseal(b);
    CHECK(contains(open_bytes(b), path + ": format version 7 is newer than this runtime (1)"));
  }
  SUBCASE("a flipped byte anywhere") {
    // Every byte after the fixed header fields is covered by the checksum.
    // Opening a file per byte is slow, so the header, the table and every
    // 7th byte go through Package::open; every byte is checked against the
    // stored checksum directly.
    const uint64_t stored = get64(good, good.size() - 8);
    for (size_t i = 0; i < good.size(); ++i) {
      std::string b = good;
      b[i] ^= char(1 << (i % 8));
      if (i < good.size() - 8) REQUIRE(checksum64(b.data(), b.size() - 8) != stored);
      if (i >= 512 && i % 7 != 0 && i < good.size() - 8) continue;
      std::string msg = open_bytes(b);
      if (i >= 24) {
        CHECK_MESSAGE(contains(msg, "checksum mismatch: the file is damaged"), "byte ", i, ": ", msg);
      } else {
        CHECK_MESSAGE(msg != "<no error>", "byte ", i);
      }
    }
  }
  SUBCASE("a section pointing past the end") {
    std::string b = good;
    // Entry 2 is the weights: push its size past the end.
    size_t entry = 24 + 2 * 40;
    put64(b, entry + 32, b.size());
    reseal(b);
    std::string msg = open_bytes(b);
    CHECK(contains(msg, "section 'weights'"));
    CHECK(contains(msg, "points past the end of the file"));
    // An offset past the end, and one that wraps around.
    b = good;
    put64(b, entry + 24, uint64_t(1) << 62);
    reseal(b);
    CHECK(contains(open_bytes(b), "points past the end"));
    b = good;
    put64(b, entry + 24, 4096);
    put64(b, entry + 32, ~uint64_t(0) - 100);
    reseal(b);
    CHECK(contains(open_bytes(b), "points past the end"));
  }
  SUBCASE("overlapping, misaligned and duplicate sections; a table too long") {
    std::string b = good;
    size_t bytecode = 24 + 1 * 40;
    put64(b, bytecode + 32, get64(b, bytecode + 32) + 64);  // runs into the next section
    uint64_t manifest_off = get64(b, 24 + 24);
    put64(b, bytecode + 24, manifest_off);
    reseal(b);
    CHECK(contains(open_bytes(b), "overlap"));
    b = good;
    put64(b, 24 + 2 * 40 + 24, get64(b, 24 + 2 * 40 + 24) - 64);
    reseal(b);
    CHECK(contains(open_bytes(b), "not aligned to 4096"));
    b = good;
    std::memcpy(b.data() + 24 + 40, "manifest\0\0\0\0\0\0\0\0", 16);
    reseal(b);
    CHECK(contains(open_bytes(b), "appears twice"));
    b = good;
    uint32_t huge = 1u << 30;
    std::memcpy(b.data() + 12, &huge, 4);
    reseal(b);
    CHECK(contains(open_bytes(b), "does not fit"));
  }
}

TEST_CASE("checksum64: streaming equals one shot; any one-byte change is seen") {
  std::string data(100003, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char((i * 2654435761u) >> 13);
  uint64_t whole = checksum64(data.data(), data.size());
  for (size_t piece : {1, 3, 7, 8, 31, 32, 33, 1000}) {
    Checksum64 c;
    for (size_t at = 0; at < data.size(); at += piece) c.update(data.data() + at, std::min(piece, data.size() - at));
    CHECK(c.finish() == whole);
  }
  // Short inputs: every single-byte change of every length up to 80.
  for (size_t n = 1; n <= 80; ++n) {
    std::string s = data.substr(0, n);
    uint64_t h = checksum64(s.data(), n);
    for (size_t i = 0; i < n; ++i)
      for (int v : {1, 0x80, 0xff}) {
        std::string t = s;
        t[i] = char(t[i] ^ v);
        REQUIRE(checksum64(t.data(), n) != h);
      }
  }
  CHECK(checksum64("", 0) != checksum64("\0", 1));
  CHECK(checksum64(nullptr, 0) == checksum64("", 0));
}

TEST_CASE("package: empty sections and empty parts are written, summed and read back (found by UBSan)") {
  // A weight of zero elements is an empty part whose data() is null; the
  // writer summed it with memcpy from null (yolo_nms, Shape's empty slices).
  TempDir dir;
  std::string a(10, 'a'), b(3, 'b');
  std::vector<std::span<const uint8_t>> parts{{reinterpret_cast<const uint8_t*>(a.data()), a.size()},
                                              std::span<const uint8_t>(),
                                              {reinterpret_cast<const uint8_t*>(b.data()), b.size()}};
  PackageWriter w;
  w.add("manifest", std::string(R"({"format": 1})"));
  w.add_parts("weights", parts, 64);
  w.add("kernels.cpu", std::span<const uint8_t>());
  w.write(dir / "empty.rpkg");
  Package pkg = Package::open(dir / "empty.rpkg");
  CHECK(pkg.section_text("weights").substr(0, 10) == a);
  CHECK(pkg.section_text("weights").substr(64) == b);  // the empty part takes no room
  CHECK(pkg.section("kernels.cpu").size() == 0);
  CHECK(w.bytes() == slurp(dir / "empty.rpkg"));
}

TEST_CASE("package: bytes() is the file write() makes") {
  TempDir dir;
  PackageWriter w;
  w.add("manifest", std::string(R"({"format": 1})"));
  w.add("weights", weights_bytes());
  std::string path = dir / "a.rpkg";
  w.write(path);
  std::string file = slurp(path);
  CHECK(w.bytes() == file);
  CHECK(file.size() > 4096 + weights_bytes().size());
}

// What loading a package of `manifest`, `weights` and bytecode that is
// never read says: the manifest's refusal, or, when the manifest is good,
// the bytecode's.
static std::string load_error(const std::string& manifest, const std::string& weights) {
  TempDir dir;
  PackageWriter w;
  w.add("manifest", manifest);
  w.add("weights", weights);
  w.add("bytecode", std::string("not read"));
  std::string path = dir / "m.rpkg";
  w.write(path);
  return error_of([&] { Model::load(path); });
}

TEST_CASE("package: a weight's offset must be a whole count, aligned to its elements (found by fuzz_package)") {
  // A weight at offset 1 made an f32 kernel load misaligned floats; an
  // offset of 1.5 or 4e34 was converted to an integer by json (undefined).
  auto load_with = [](const std::string& offset) {
    return load_error(R"({"format": 1, "target": {"kind": "cpu"}, "inputs": [], "outputs": [],
                          "weights": [{"name": "w", "dtype": "f32", "shape": [2], "nbytes": 8, "offset": )" +
                          offset + "}]}",
                      std::string(64, '\0'));
  };
  CHECK(contains(load_with("1"), "weight 'w' at offset 1 is not aligned to its 4-byte elements"));
  CHECK(contains(load_with("1.5"), "weight 'w': offset is 1.5, not an integer"));
  CHECK(contains(load_with("-4"), "weight 'w' has offset -4, not a count"));
  CHECK(contains(load_with("4e34"), "weight 'w': offset is 4e+34, not an integer"));
  // Aligned, the weights load and the bytecode is what fails.
  CHECK(contains(load_with("8"), "bytecode"));
}

TEST_CASE("package: an input's ndim must be -1 or a rank up to 64, never clamped into one") {
  auto load_with = [](const std::string& ndim) {
    return load_error(R"({"format": 1, "target": {"kind": "cpu"}, "outputs": [], "weights": [],
                          "inputs": [{"name": "x", "dtype": "f32", "ndim": )" +
                          ndim + "}]}",
                      std::string());
  };
  CHECK(contains(load_with("1000"), "a tensor's ndim is 1000: not -1 (unknown) or a rank up to 64"));
  CHECK(contains(load_with("-2"), "a tensor's ndim is -2"));
  CHECK(contains(load_with("2.5"), "a tensor's ndim is 2.5, not an integer"));
  CHECK(contains(load_with("3"), "bytecode"));  // a good ndim: the bytecode is what fails
}

}  // namespace relax::rt
