// gpt-oss's harmony layout: a sequence of messages, each a header
// (`<|start|>assistant`, `<|channel|>NAME`, an optional ` to=functions.NAME`
// recipient and content type) then `<|message|>` and a body ending at
// `<|end|>`, `<|call|>`, `<|return|>` or the next header. The analysis channel
// is reasoning, a body addressed to functions.NAME is a call's JSON arguments,
// anything else (final, commentary preambles, text outside messages) content.
#include <algorithm>
#include <cstring>

#include "runtime/tool_calls/tool_calls_internal.h"

namespace qkv::toolcall::detail {

namespace {

const char* const kStart = "<|start|>";
const char* const kChannel = "<|channel|>";
const char* const kMessage = "<|message|>";
const char* const kEnds[] = {"<|end|>", "<|call|>", "<|return|>"};
const size_t kMaxHeader = 512;

std::string rtrim(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

// The earliest of the body terminators at or after pos; *consumed is the
// length to skip (0 for a following header, which is read next).
size_t find_body_end(const std::string& s, size_t pos, size_t* consumed) {
  size_t best = std::string::npos;
  *consumed = 0;
  for (const char* e : kEnds) {
    size_t at = s.find(e, pos);
    if (at < best) best = at, *consumed = std::strlen(e);
  }
  for (const char* h : {kStart, kChannel}) {
    size_t at = s.find(h, pos);
    if (at < best) best = at, *consumed = 0;
  }
  return best;
}

size_t holdback_any(const std::string& s, size_t from) {
  // Every harmony token begins "<|": hold a tail that could still be one.
  static const std::vector<const char*> tokens = {kStart, kChannel, kMessage, kEnds[0], kEnds[1], kEnds[2]};
  size_t k = s.size() > 12 ? std::max(from, s.size() - 12) : from;
  for (; k < s.size(); ++k)
    for (const char* t : tokens)
      if (ends_inside(s, k, t)) return k;
  return s.size();
}

// The word after key in header (up to whitespace or '<').
std::string header_word(const std::string& header, const char* key) {
  size_t at = header.find(key);
  if (at == std::string::npos) return "";
  size_t b = at + std::strlen(key), e = b;
  while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
  return header.substr(b, e - b);
}

}  // namespace

void parse_harmony(const std::string& s, const ParseOptions& opts, bool final, RawParse* out) {
  size_t pos = 0;
  bool had_reasoning = false;
  // The generation prompt ends "<|start|>assistant", so the output may go on
  // with the rest of that header: " to=functions.NAME<|channel|>...".
  bool header_at_start = starts_with_at(s, 0, " to=");
  if (!final && ends_inside(s, 0, " to=")) return;
  for (;;) {
    size_t h = header_at_start ? 0 : std::min(s.find(kStart, pos), s.find(kChannel, pos));
    if (h == std::string::npos) {
      size_t stop = final ? s.size() : holdback_any(s, pos);
      out->content.append(s, pos, stop - pos);
      return;
    }
    out->content.append(s, pos, h - pos);
    const char* opener = header_at_start ? "" : starts_with_at(s, h, kStart) ? kStart : kChannel;
    size_t m = s.find(kMessage, h);
    if (m == std::string::npos || m - h > kMaxHeader) {
      if (!final && m == std::string::npos && s.size() - h <= kMaxHeader) return;  // the header may still end
      out->content.append(opener);  // not a header: plain text
      pos = h + std::strlen(opener);
      header_at_start = false;
      continue;
    }
    header_at_start = false;
    const std::string header = s.substr(h, m - h);
    const std::string channel = header_word(header, kChannel);
    const std::string recipient = header_word(header, "to=");
    const size_t body = m + std::strlen(kMessage);
    if (opts.tools && recipient.rfind("functions.", 0) == 0 && recipient.size() > 10) {
      const std::string name = recipient.substr(10);
      size_t j = skip_spaces(s, body);
      if (j >= s.size()) {
        if (!final) return;
        out->content.append(s, h, std::string::npos);
        out->incomplete = true;
        return;
      }
      if (s[j] == '{') {
        ScanResult v = scan_json_value(s, j);
        if (v.status != Scan::kComplete) {
          if (!final) {
            out->calls.push_back(ToolCall{"", name, rtrim(s.substr(j, v.end - j))});
            out->partial_call = true;
          } else {
            out->content.append(s, h, std::string::npos);
            out->incomplete = true;
          }
          return;
        }
        out->calls.push_back(ToolCall{"", name, s.substr(j, v.end - j)});
        size_t consumed;
        size_t e = find_body_end(s, v.end, &consumed);
        if (e == std::string::npos) return;  // anything after the arguments is not part of the answer
        pos = e + consumed;
        continue;
      }
      // A body that is not JSON: not a call, shown as content below.
    }
    size_t consumed;
    size_t e = find_body_end(s, body, &consumed);
    const size_t stop = e != std::string::npos ? e : final ? s.size() : holdback_any(s, body);
    if (channel == "analysis") {
      if (opts.extract_reasoning) {
        if (had_reasoning) out->reasoning += '\n';
        out->reasoning.append(s, body, stop - body);
        had_reasoning = true;
      } else {
        out->content.append(s, h, (e != std::string::npos ? e + consumed : stop) - h);
      }
    } else {
      out->content.append(s, body, stop - body);
    }
    if (e == std::string::npos) return;
    pos = e + consumed;
  }
}

}  // namespace qkv::toolcall::detail
