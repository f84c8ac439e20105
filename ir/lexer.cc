#include "ir/lexer.h"

namespace relax {
namespace {

bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool ident_char(char c) { return ident_start(c) || digit(c) || c == '.'; }
bool suffix_char(char c) { return ident_start(c) || digit(c); }

// Longest first.
constexpr std::string_view kPuncts[] = {"...", "->", "//", "==", "!=", "<=", ">=", "<<", ">>", "&&", "||",
                                        "(",   ")",  "[",  "]",  "{",  "}",  ",",  ":",  "=",  "<",  ">",
                                        "+",   "-",  "*",  "/",  "%",  "&",  "|",  "^",  "!",  "~"};

std::string show_char(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, char(c));
  static const char* hex = "0123456789abcdef";
  return std::string("\\x") + hex[c >> 4] + hex[c & 15];
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

}  // namespace

bool is_identifier(std::string_view s) {
  if (s.empty() || !ident_start(s[0])) return false;
  for (char c : s)
    if (!ident_char(c)) return false;
  return true;
}

bool is_reserved_word(std::string_view s) {
  static constexpr std::string_view kWords[] = {
      "fn",         "prog",    "extern", "module_attrs", "attrs", "dataflow", "return", "if",  "else",
      "match_cast", "const",   "prim",   "shape",        "op",    "true",     "false",  "for", "in",
      "alloc",      "barrier", "cast",   "select",       "min",   "max",      "inf",    "nan", "sym",
      "Object",     "Prim",    "Shape",  "Tensor",       "Tuple", "Func",     "Buffer"};
  for (std::string_view w : kWords)
    if (s == w) return true;
  // Non-finite immediates of tensor programs: f32.inf, bf16.nan, ...
  auto dot = s.rfind('.');
  if (dot != std::string_view::npos) {
    std::string_view tail = s.substr(dot + 1);
    if (tail == "inf" || tail == "nan") return true;
  }
  return false;
}

std::string quote_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string Token::describe() const {
  switch (kind) {
    case TokKind::End:
      return "end of input";
    case TokKind::Ident:
      return "'" + text + "'";
    case TokKind::Global:
      return "'@" + (is_identifier(text) ? text : quote_string(text)) + "'";
    case TokKind::String: {
      std::string q = quote_string(text);
      if (q.size() > 40) q = q.substr(0, 36) + "...\"";
      return "'" + q + "'";
    }
    case TokKind::Int:
    case TokKind::Float:
      return "'" + text + suffix + "'";
    case TokKind::Punct:
      return "'" + text + "'";
  }
  return "?";
}

void Lexer::error_at(int line, int col, const std::string& msg) const {
  throw ParseError(cat(file_, ":", line, ":", col, ": ", msg));
}

const Token& Lexer::peek(size_t k) {
  while (ahead_.size() <= k) {
    if (!ahead_.empty() && ahead_.back().kind == TokKind::End) return ahead_.back();
    ahead_.push_back(lex_one());
  }
  return ahead_[k];
}

Token Lexer::next() {
  peek(0);
  Token t = ahead_.front();
  if (t.kind != TokKind::End) ahead_.pop_front();
  return t;
}

Token Lexer::lex_one() {
  bool newline = false;
  while (pos_ < src_.size()) {
    char c = src_[pos_];
    if (c == '\n') {
      newline = true;
      line_start_ = ++pos_;
      ++line_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
  Token t;
  t.line = line_;
  t.col = int(pos_ - line_start_) + 1;
  t.offset = pos_;
  t.newline_before = newline;
  if (pos_ >= src_.size()) return t;  // End

  char c = src_[pos_];
  if (ident_start(c)) {
    size_t start = pos_;
    while (pos_ < src_.size() && ident_char(src_[pos_])) ++pos_;
    t.kind = TokKind::Ident;
    t.text = std::string(src_.substr(start, pos_ - start));
    return t;
  }
  if (digit(c)) {
    lex_number(t);
    return t;
  }
  if (c == '"') {
    t.kind = TokKind::String;
    t.text = lex_string();
    return t;
  }
  if (c == '@') {
    ++pos_;
    t.kind = TokKind::Global;
    if (pos_ < src_.size() && src_[pos_] == '"') {
      t.text = lex_string();
    } else if (pos_ < src_.size() && ident_start(src_[pos_])) {
      size_t start = pos_;
      while (pos_ < src_.size() && ident_char(src_[pos_])) ++pos_;
      t.text = std::string(src_.substr(start, pos_ - start));
    } else {
      error_at(t.line, t.col, "expected a name after '@'");
    }
    return t;
  }
  for (std::string_view p : kPuncts) {
    if (src_.substr(pos_, p.size()) == p) {
      pos_ += p.size();
      t.kind = TokKind::Punct;
      t.text = std::string(p);
      return t;
    }
  }
  error_at(t.line, t.col, "unexpected character '" + show_char(static_cast<unsigned char>(c)) + "'");
}

void Lexer::lex_number(Token& t) {
  size_t start = pos_;
  bool is_float = false;
  while (pos_ < src_.size() && digit(src_[pos_])) ++pos_;
  if (pos_ + 1 < src_.size() && src_[pos_] == '.' && digit(src_[pos_ + 1])) {
    is_float = true;
    ++pos_;
    while (pos_ < src_.size() && digit(src_[pos_])) ++pos_;
  }
  if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
    size_t p = pos_ + 1;
    if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
    if (p < src_.size() && digit(src_[p])) {
      is_float = true;
      pos_ = p;
      while (pos_ < src_.size() && digit(src_[pos_])) ++pos_;
    }
  }
  t.kind = is_float ? TokKind::Float : TokKind::Int;
  t.text = std::string(src_.substr(start, pos_ - start));
  if (pos_ < src_.size() && ident_start(src_[pos_])) {
    size_t s = pos_;
    while (pos_ < src_.size() && suffix_char(src_[pos_])) ++pos_;
    t.suffix = std::string(src_.substr(s, pos_ - s));
  }
}

std::string Lexer::lex_string() {
  int line = line_;
  int col = int(pos_ - line_start_) + 1;
  ++pos_;  // opening quote
  std::string out;
  auto hex4 = [&](size_t at) -> int {
    if (at + 4 > src_.size()) return -1;
    int v = 0;
    for (size_t i = at; i < at + 4; ++i) {
      char h = src_[i];
      int d = digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  };
  for (;;) {
    if (pos_ >= src_.size() || src_[pos_] == '\n') error_at(line, col, "unterminated string");
    char c = src_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c != '\\') {
      out += c;
      ++pos_;
      continue;
    }
    int ecol = int(pos_ - line_start_) + 1;
    if (pos_ + 1 >= src_.size()) error_at(line, col, "unterminated string");
    char e = src_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        int cp = hex4(pos_);
        if (cp < 0) error_at(line_, ecol, "invalid \\u escape in string");
        pos_ += 4;
        uint32_t code = uint32_t(cp);
        if (cp >= 0xd800 && cp < 0xdc00 && pos_ + 1 < src_.size() && src_[pos_] == '\\' && src_[pos_ + 1] == 'u') {
          int lo = hex4(pos_ + 2);
          if (lo >= 0xdc00 && lo < 0xe000) {
            code = 0x10000 + ((uint32_t(cp) - 0xd800) << 10) + (uint32_t(lo) - 0xdc00);
            pos_ += 6;
          }
        }
        append_utf8(out, code);
        break;
      }
      default:
        error_at(line_, ecol, "invalid escape '\\" + show_char(static_cast<unsigned char>(e)) + "' in string");
    }
  }
}

}  // namespace relax
