// fuzz_tool_calls: the tool-call and reasoning parser. Byte 0 picks the family
// (and, in its high bits, the parse options); the rest is model output, parsed
// whole and streamed in chunks whose sizes come from the output itself. Both
// must agree: a disagreement aborts, as does any crash or exception.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/tool_calls/tool_calls.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using namespace qkv::toolcall;

std::string show(const ParsedMessage& m) {
  std::string s = m.content + '\x01' + m.reasoning;
  for (const ToolCall& c : m.calls) s += '\x02' + c.id + '\x03' + c.name + '\x03' + c.arguments;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Family family = static_cast<Family>(data[0] % (static_cast<int>(Family::kNone) + 1));
  ParseOptions opts;
  opts.starts_in_reasoning = (data[0] >> 4) & 1;
  opts.extract_reasoning = !((data[0] >> 5) & 1);
  opts.tools = !((data[0] >> 6) & 1);
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ParsedMessage whole = parse_message(family, text, opts);

  StreamParser stream(family, opts);
  ParsedMessage sum;
  auto take = [&](const MessageDelta& d) {
    sum.content += d.content;
    sum.reasoning += d.reasoning;
    for (const CallDelta& c : d.calls) {
      if (c.index > sum.calls.size()) std::abort();  // calls arrive in order
      if (c.index == sum.calls.size()) sum.calls.push_back(ToolCall{c.id, c.name, ""});
      sum.calls[c.index].arguments += c.arguments;
    }
  };
  size_t pos = 0, step = 0;
  while (pos < text.size()) {
    size_t n = 1 + static_cast<unsigned char>(text[step++ % text.size()]) % 9;
    take(stream.feed(text.substr(pos, n)));
    pos += n;
  }
  take(stream.finish(false));
  if (sum.calls.size() > stream.message().calls.size()) sum.calls.resize(stream.message().calls.size());
  if (show(sum) != show(whole) || show(stream.message()) != show(whole)) std::abort();
  return 0;
}
