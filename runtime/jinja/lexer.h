// Splits template source into text and tag tokens with Hugging Face's
// whitespace settings (trim_blocks, lstrip_blocks) and the `-` / `+` markers,
// and tags into expression tokens.
#pragma once

#include <string>
#include <vector>

#include "runtime/jinja/ast.h"

namespace qkv::jinja {

struct Token {
  enum Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;  // text / name / string value / operator / number spelling
  Pos pos;
};

// Throws qkv::Error "line L column C: ..." on an unterminated tag, string or comment.
std::vector<Token> lex(const std::string& source);

}  // namespace qkv::jinja
