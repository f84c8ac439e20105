#include "runtime/npy.h"

#include <cstring>

#include "runtime/error.h"
#include "runtime/file_util.h"

namespace relax::rt {
namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

// numpy's type character and this runtime's code, for the types both have.
struct Kind {
  char c;
  uint8_t code;
};
constexpr Kind kKinds[] = {{'f', DType::kFloat}, {'i', DType::kInt}, {'u', DType::kUInt}, {'b', DType::kBool}};

// A cursor over the header dict, a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class DictParser {
 public:
  DictParser(std::string_view s, std::string_view label) : s_(s), label_(label) {}

  [[noreturn]] void fail(std::string_view what) const { rt_fail(label_, ": bad .npy header (", what, "): ", s_); }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a string");
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string v(s_.substr(i_, end - i_));
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    ws();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      size_t n = std::strlen(word);
      if (s_.substr(i_, n) == word) {
        i_ += n;
        return value;
      }
    }
    fail("expected True or False");
  }
  std::vector<int64_t> shape() {
    expect('(');
    std::vector<int64_t> dims;
    while (!eat(')')) {
      ws();
      int64_t v = 0;
      size_t start = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (INT64_MAX - 9) / 10) fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ == start) fail("expected a dimension");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      dims.push_back(v);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }

 private:
  std::string_view s_;
  std::string_view label_;
  size_t i_ = 0;
};

DType parse_descr(const std::string& d, std::string_view label) {
  if (d.size() >= 3) {
    char order = d[0];
    int bytes = d[2] - '0';
    if (d.size() == 3 && bytes >= 1 && bytes <= 8) {
      if (order == '>' && bytes > 1) rt_fail(label, ": big-endian data ('", d, "') is not supported");
      if (order == '<' || order == '|' || order == '=' || order == '>') {
        for (const Kind& k : kKinds) {
          if (k.c != d[1]) continue;
          DType t(k.code, bytes * 8);
          if (npy_descr(t)) return t;
        }
      }
    }
  }
  rt_fail(label, ": unsupported .npy dtype '", d, "'");
}

}  // namespace

std::optional<std::string> npy_descr(DType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == DType::kBool) return "|b1";
  char c = 0;
  if (t.code == DType::kFloat && (t.bits == 16 || t.bits == 32 || t.bits == 64)) c = 'f';
  if (t.code == DType::kInt && t.bits >= 8 && t.bits <= 64) c = 'i';
  if (t.code == DType::kUInt && t.bits >= 8 && t.bits <= 64) c = 'u';
  if (!c) return std::nullopt;
  return std::string(t.bits == 8 ? "|" : "<") + c + char('0' + t.bits / 8);
}

Tensor parse_npy(std::span<const uint8_t> b, std::string_view label) {
  if (b.size() < 10 || std::memcmp(b.data(), kMagic, 6) != 0) rt_fail(label, ": not a .npy file (bad magic)");
  int major = b[6];
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = size_t(b[8]) | size_t(b[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) rt_fail(label, ": truncated .npy header");
    header_len = size_t(b[8]) | size_t(b[9]) << 8 | size_t(b[10]) << 16 | size_t(b[11]) << 24;
    start = 12;
  } else {
    rt_fail(label, ": unsupported .npy format version ", major, ".", int(b[7]));
  }
  if (header_len > b.size() - start) rt_fail(label, ": truncated .npy header");
  std::string_view header(reinterpret_cast<const char*>(b.data() + start), header_len);

  DictParser p(header, label);
  std::optional<DType> dtype;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  p.expect('{');
  while (!p.eat('}')) {
    std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      dtype = parse_descr(p.str(), label);
    } else if (key == "fortran_order") {
      fortran = p.boolean();
    } else if (key == "shape") {
      shape = p.shape();
    } else {
      p.fail("unknown key '" + key + "'");
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!dtype || !fortran || !shape) p.fail("descr, fortran_order and shape are required");
  if (*fortran) rt_fail(label, ": Fortran-order arrays are not supported (save with C order)");

  const uint8_t* data = b.data() + start + header_len;
  size_t have = b.size() - start - header_len;
  int64_t numel = 0;
  try {
    numel = shape_numel(*shape);
  } catch (const Error& e) {
    rt_fail(label, ": ", e.what());
  }
  if (numel > int64_t(have))
    rt_fail(label, ": truncated: shape ", shape_str(*shape), " needs more data than the file has");
  size_t need = size_t(dtype->storage_bytes(numel));
  if (have != need) rt_fail(label, ": shape ", shape_str(*shape), " needs ", need, " data bytes, file has ", have);
  Tensor t = Tensor::empty(*dtype, std::move(*shape));
  if (need) std::memcpy(t.data(), data, need);
  return t;
}

Tensor read_npy(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_npy(file->bytes(), path);
}

std::string encode_npy(const Tensor& t) {
  auto descr = npy_descr(t.dtype());
  if (!descr) rt_fail("dtype ", t.dtype(), " cannot be stored in a .npy file");
  std::string dict = "{'descr': '" + *descr + "', 'fortran_order': False, 'shape': (";
  for (int64_t d : t.shape()) dict += std::to_string(d) + ", ";
  if (t.ndim() >= 1) dict.resize(dict.size() - (t.ndim() == 1 ? 1 : 2));  // "(3,)" but "(2, 3)"
  dict += "), }";
  // Pad with spaces and end with '\n' so that the data starts 64-aligned.
  size_t prefix = 10;  // magic, version, u16 length (1.0); 2.0 has a u32
  auto padded = [&] { return (prefix + dict.size() + 1 + 63) / 64 * 64 - prefix; };
  size_t header_len = padded();
  if (header_len > 65535) {
    prefix = 12;
    header_len = padded();
  }
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += char(prefix == 10 ? 1 : 2);
  out += '\0';
  for (int i = 0; i < (prefix == 10 ? 2 : 4); ++i) out += char((header_len >> (8 * i)) & 0xff);
  out += dict;
  out.append(static_cast<const char*>(t.data()), t.nbytes());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string bytes;
  try {
    bytes = encode_npy(t);
  } catch (const Error& e) {
    rt_fail(path, ": ", e.what());
  }
  AtomicFile out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace relax::rt
