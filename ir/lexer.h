// The tokenizer of the IR text format (docs/ir_text.md), shared by the
// parser, plus the two spelling helpers the printer needs to write names and
// strings the lexer reads back.
//
// Tokens: identifiers (dots allowed after the first character), globals
// (`@name`, `@"quoted"`), strings (JSON escapes), numbers with an optional
// dtype suffix (`3`, `1.5`, `2e-05`, `1.5f32`, `255u8`) and punctuation. `%`
// is always punctuation; the parser reads `%name` (no space) as a dataflow
// variable where an expression is expected. Comments run from `#` to the end
// of the line. The lexer works on bytes and never fails on any input other
// than by raising an Error at a position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "ir/error.h"

namespace relax {

// An Error raised while reading text; its message starts with FILE:LINE:COL.
struct ParseError : Error {
  using Error::Error;
};

enum class TokKind : uint8_t { End, Ident, Global, String, Int, Float, Punct };

struct Token {
  TokKind kind = TokKind::End;
  // Ident/Global: the name; String: the decoded value; Int/Float: the digits
  // without suffix; Punct: the symbol.
  std::string text;
  std::string suffix;  // Int/Float: a dtype suffix ("f32"), else empty
  int line = 1, col = 1;
  size_t offset = 0;            // byte offset of the first character
  bool newline_before = false;  // a line break separates it from the previous token

  bool is(std::string_view p) const { return kind == TokKind::Punct && text == p; }
  bool is_ident(std::string_view s) const { return kind == TokKind::Ident && text == s; }
  // How error messages show it: "'x'", "'@f'", "end of input".
  std::string describe() const;
};

class Lexer {
 public:
  Lexer(std::string_view src, std::string file) : src_(src), file_(std::move(file)) {}

  // The k-th token ahead (0: the next one), lexed on demand.
  const Token& peek(size_t k = 0);
  Token next();

  [[noreturn]] void error_at(int line, int col, const std::string& msg) const;

 private:
  Token lex_one();
  void lex_number(Token& t);
  std::string lex_string();  // at the opening quote

  std::string_view src_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  std::deque<Token> ahead_;
};

// [A-Za-z_][A-Za-z0-9_.]*
bool is_identifier(std::string_view s);
// Words the grammar gives a meaning (keywords, struct-info and form names,
// `f32.inf`-style literals): the printer never names a variable, symbolic
// variable or buffer with one, and the parser refuses to bind one.
bool is_reserved_word(std::string_view s);
// A JSON string literal, quotes included; bytes >= 0x80 are kept as they are.
std::string quote_string(std::string_view s);

}  // namespace relax
