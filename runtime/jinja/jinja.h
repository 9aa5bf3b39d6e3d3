// A small Jinja2 interpreter for chat templates, set up as Hugging Face's
// apply_chat_template sets Jinja2 up: trim_blocks, lstrip_blocks, loop
// controls, tojson without ASCII escaping, raise_exception, strftime_now.
// Errors (syntax, runtime, limits) throw qkv::Error naming the line and
// column; raise_exception(msg) throws TemplateRaise carrying msg verbatim.
#pragma once

#include <memory>
#include <string>

#include "kernels/error.h"
#include "runtime/jinja/value.h"

namespace qkv::jinja {

struct Program;

class TemplateRaise : public Error {
 public:
  explicit TemplateRaise(const std::string& msg) : Error(msg) {}
};

struct Limits {
  size_t max_output = 16u << 20;   // bytes of rendered text
  int max_call_depth = 64;         // nested macro calls
  int64_t max_steps = 20000000;    // loop iterations + calls + outputs
};

class Template {
 public:
  explicit Template(const std::string& source);  // parses; throws on a syntax error
  // context: a dict of the template's variables (messages, bos_token, ...).
  std::string render(const Value& context, const Limits& limits = {}) const;

 private:
  std::shared_ptr<Program> prog_;
};

}  // namespace qkv::jinja
