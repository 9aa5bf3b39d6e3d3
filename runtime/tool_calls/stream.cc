// Whole-text parsing and streaming. Both read through parse_text: the stream
// re-reads the text so far on each feed and sends the difference from what it
// has sent, which the parser keeps monotone (what it reports for a prefix is a
// prefix of what it reports for any continuation), so the deltas add up to the
// whole-text parse however the text is cut into pieces.
#include "runtime/tool_calls/tool_calls_internal.h"

namespace qkv::toolcall {

namespace {

using detail::is_space;

std::string trim_both(const std::string& s) {
  size_t b = detail::skip_spaces(s, 0);
  size_t e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// The message a parse stands for. Content and reasoning are trimmed at both
// ends; for a text still growing that is also the settled part, as trailing
// whitespace waits to see whether more text follows it.
ParsedMessage view_of(const detail::RawParse& p) {
  ParsedMessage m;
  m.content = trim_both(p.content);
  m.reasoning = trim_both(p.reasoning);
  m.calls = p.calls;
  return m;
}

bool has_prefix(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Appends to *sent what next adds to it; returns the addition ("" when next
// does not extend it: the parser's monotonicity makes that not happen).
std::string extend(std::string* sent, const std::string& next) {
  if (!has_prefix(next, *sent)) return "";
  std::string add = next.substr(sent->size());
  *sent = next;
  return add;
}

}  // namespace

ParsedMessage parse_message(Family family, const std::string& text, const ParseOptions& options) {
  return view_of(detail::parse_text(detail::spec_of(family), text, options, true, false));
}

StreamParser::StreamParser(Family family, ParseOptions options) : family_(family), options_(options) {}

MessageDelta StreamParser::feed(const std::string& text) {
  if (finished_) return {};
  text_ += text;
  return advance(false, false);
}

MessageDelta StreamParser::finish(bool truncated) {
  if (finished_) return {};
  MessageDelta d = advance(true, truncated);
  finished_ = true;
  return d;
}

MessageDelta StreamParser::advance(bool final, bool truncated) {
  detail::RawParse p = detail::parse_text(detail::spec_of(family_), text_, options_, final, truncated);
  ParsedMessage next = view_of(p);
  MessageDelta d;
  d.content = extend(&message_.content, next.content);
  d.reasoning = extend(&message_.reasoning, next.reasoning);
  for (size_t i = 0; i < next.calls.size(); ++i) {
    const ToolCall& c = next.calls[i];
    if (i >= message_.calls.size()) {
      message_.calls.push_back(c);
      d.calls.push_back(CallDelta{i, c.id, c.name, c.arguments});
      continue;
    }
    std::string add = extend(&message_.calls[i].arguments, c.arguments);
    if (!add.empty()) d.calls.push_back(CallDelta{i, "", "", add});
  }
  if (final) {
    // A call reported while it grew but unfinished at the end is withdrawn.
    if (next.calls.size() < message_.calls.size()) message_.calls.resize(next.calls.size());
    incomplete_ = p.incomplete;
    message_ = next;
  }
  return d;
}

}  // namespace qkv::toolcall
