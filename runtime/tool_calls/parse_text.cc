// Reading a generated text (all of it, or the part generated so far) into raw
// content, raw reasoning and calls: the thinking block, then free text in which
// the family's openers begin calls (Layout::kMarkers), or the Generic JSON
// answer. Given only part of a text, the result holds what no continuation can
// change: text that might still turn into markup is held back.
#include <cstring>

#include "runtime/tool_calls/tool_calls_internal.h"

namespace qkv::toolcall::detail {

namespace {

// The start of the shortest tail of s[from..] that is a proper prefix of one of
// markers (so could still become it); s.size() when there is none.
size_t holdback(const std::string& s, size_t from, const std::vector<const char*>& markers) {
  size_t longest = 0;
  for (const char* m : markers) longest = std::max(longest, std::strlen(m));
  size_t k = s.size() >= longest ? std::max(from, s.size() - longest + 1) : from;
  for (; k < s.size(); ++k)
    for (const char* m : markers)
      if (ends_inside(s, k, m)) return k;
  return s.size();
}

// The thinking block at the start. Returns false when the text ends inside it
// (or could still begin it), with what is settled written to out.
bool read_thinking(const FamilySpec& spec, const std::string& s, const ParseOptions& opts, bool final, RawParse* out,
                   size_t* pos) {
  const char* open = spec.think_open;
  const char* close = spec.think_close;
  size_t body;
  size_t j = skip_spaces(s, 0);
  if (opts.starts_in_reasoning) {
    body = 0;
  } else if (starts_with_at(s, j, open)) {
    body = j + std::strlen(open);
  } else if (!final && (j == s.size() || ends_inside(s, j, open))) {
    return false;
  } else {
    *pos = 0;
    return true;
  }
  size_t end = s.find(close, body);
  if (end == std::string::npos) {
    size_t stop = final ? s.size() : holdback(s, body, {close});
    if (opts.extract_reasoning) out->reasoning.append(s, body, stop - body);
    else out->content.append(s, 0, stop);
    return false;
  }
  *pos = end + std::strlen(close);
  if (opts.extract_reasoning) out->reasoning.append(s, body, end - body);
  else out->content.append(s, 0, *pos);
  return true;
}

struct Marker {
  const char* text;
  const Opener* opener;  // nullptr: silent markup, dropped
};

// Next occurrence of each marker, cached so that a scan of the whole text stays
// linear however many markers turn out not to begin calls.
class MarkerFinder {
 public:
  MarkerFinder(const std::string& s, std::vector<Marker> markers)
      : s_(s), markers_(std::move(markers)), next_(markers_.size(), 0), searched_(markers_.size(), false) {}

  // The earliest marker at or after pos (the longest when several start there).
  const Marker* find(size_t pos, size_t* at) {
    const Marker* best = nullptr;
    for (size_t k = 0; k < markers_.size(); ++k) {
      if (!searched_[k] || (next_[k] != std::string::npos && next_[k] < pos)) {
        next_[k] = s_.find(markers_[k].text, pos);
        searched_[k] = true;
      }
      if (next_[k] == std::string::npos) continue;
      if (!best || next_[k] < *at || (next_[k] == *at && std::strlen(markers_[k].text) > std::strlen(best->text))) {
        best = &markers_[k];
        *at = next_[k];
      }
    }
    return best;
  }
  std::vector<const char*> texts() const {
    std::vector<const char*> t;
    for (const Marker& m : markers_) t.push_back(m.text);
    return t;
  }

 private:
  const std::string& s_;
  std::vector<Marker> markers_;
  std::vector<size_t> next_;
  std::vector<bool> searched_;
};

// Settles the outcome of a call reader that did not complete: not final, the
// committed part is reported and reading stops; final, the unfinished call's
// raw text becomes content.
void settle_unfinished(const std::string& s, size_t call_start, const CallParse& r, bool final, RawParse* out) {
  out->calls.insert(out->calls.end(), r.calls.begin(), r.calls.end());
  if (!final) {
    if (r.has_partial) {
      out->calls.push_back(r.partial);
      out->partial_call = true;
    }
    return;
  }
  size_t raw = r.calls.empty() ? call_start : r.raw_start;
  out->content.append(s, raw, std::string::npos);
  out->incomplete = true;
}

void parse_markers(const FamilySpec& spec, const std::string& s, size_t pos, const ParseOptions& opts, bool final,
                   bool truncated, RawParse* out) {
  std::vector<Marker> markers;
  if (opts.tools) {
    for (const Opener& o : spec.openers) markers.push_back(Marker{o.text, &o});
    for (const char* m : spec.call_silent) markers.push_back(Marker{m, nullptr});
  }
  for (const char* m : spec.silent) markers.push_back(Marker{m, nullptr});
  MarkerFinder finder(s, markers);
  const std::vector<const char*> marker_texts = finder.texts();
  bool bare_call_may_follow = spec.bare_object_calls && opts.tools;
  bool after_call = false;
  for (;;) {
    if (bare_call_may_follow) {
      size_t j = skip_spaces(s, pos);
      while (after_call && j < s.size() && std::strchr(spec.call_separators, s[j]) && s[j]) j = skip_spaces(s, j + 1);
      if (j >= s.size()) {
        if (!final) return;                              // whitespace so far: wait for what follows
        if (!after_call) out->content.append(s, pos, std::string::npos);
        return;                                          // separators after the last call are dropped
      }
      bare_call_may_follow = false;
      if (s[j] == '{') {
        CallParse r = parse_call_object(s, j, spec.call_ids, final);
        if (r.status == CallStatus::kComplete) {
          out->calls.insert(out->calls.end(), r.calls.begin(), r.calls.end());
          pos = r.end;
          bare_call_may_follow = after_call = true;
          continue;
        }
        if (r.status == CallStatus::kUndecided) {
          if (final) out->content.append(s, pos, std::string::npos);  // an unfinished object that is not a call
          return;
        }
        if (r.status != CallStatus::kNotACall) {
          settle_unfinished(s, j, r, final, out);
          return;
        }
      }
    }
    size_t at = 0;
    const Marker* m = finder.find(pos, &at);
    if (!m) {
      // Cut by max_tokens inside the markup that follows calls (a call
      // block's end): that piece of markup is not content.
      const bool cut_after_calls = final && truncated && !out->calls.empty();
      size_t stop = final && !cut_after_calls ? s.size() : holdback(s, pos, marker_texts);
      out->content.append(s, pos, stop - pos);
      return;
    }
    out->content.append(s, pos, at - pos);
    size_t after = at + std::strlen(m->text);
    if (!m->opener) {
      pos = after;
      continue;
    }
    CallParse r = parse_opener_forms(*m->opener, s, after, spec.call_ids, final, truncated);
    switch (r.status) {
      case CallStatus::kNotACall:
        out->content.append(m->text);
        pos = after;
        continue;
      case CallStatus::kComplete:
        out->calls.insert(out->calls.end(), r.calls.begin(), r.calls.end());
        if (r.hold) return;  // the text ends where closing markup may still come
        pos = r.end;
        bare_call_may_follow = after_call = spec.bare_object_calls && opts.tools;
        continue;
      default:
        settle_unfinished(s, at, r, final, out);
        return;
    }
  }
}

}  // namespace

void parse_generic_json(const std::string& s, size_t pos, const ParseOptions& opts, bool final, RawParse* out) {
  size_t j = skip_spaces(s, pos);
  auto plain = [&] { out->content.append(s, pos, std::string::npos); };
  if (!opts.tools) return plain();
  if (j >= s.size()) return final ? plain() : void();
  if (s[j] != '{') return plain();
  // {"tool_calls": [...]}, {"tool_call": {...}} or {"response": "..."}: the first key decides.
  size_t k = skip_spaces(s, j + 1);
  if (k >= s.size()) return final ? plain() : void();
  if (s[k] != '"') return plain();
  ScanResult ks = scan_json_value(s, k);
  if (ks.status != Scan::kComplete) return (final || ks.status == Scan::kInvalid) ? plain() : void();
  std::string key;
  size_t key_end;
  decode_json_string(s, k, &key, &key_end);
  if (key != "tool_calls" && key != "tool_call" && key != "response") return plain();
  size_t v = skip_spaces(s, ks.end);
  if (v < s.size() && s[v] == ':') v = skip_spaces(s, v + 1);
  else if (v < s.size()) return plain();
  if (v >= s.size()) return final ? plain() : void();
  if (key == "response") {
    if (s[v] != '"') return plain();
    // The answer streams as its string is decoded; what follows the string is ignored.
    size_t end;
    decode_json_string(s, v, &out->content, &end);
    return;
  }
  const char want = key == "tool_calls" ? '[' : '{';
  if (s[v] != want) return plain();
  CallParse r = want == '[' ? parse_call_array(s, v, false, final) : parse_call_object(s, v, false, final);
  switch (r.status) {
    case CallStatus::kNotACall:
      return plain();
    case CallStatus::kUndecided:
      if (final) {
        plain();
        out->incomplete = true;
      }
      return;
    case CallStatus::kComplete:
      out->calls.insert(out->calls.end(), r.calls.begin(), r.calls.end());
      return;  // the closing brace and anything after it are not part of the answer
    default:
      settle_unfinished(s, pos, r, final, out);
      return;
  }
}

RawParse parse_text(const FamilySpec& spec, const std::string& s, const ParseOptions& opts, bool final,
                    bool truncated) {
  RawParse out;
  if (spec.layout == Layout::kHarmony) {
    parse_harmony(s, opts, final, &out);
    return out;
  }
  size_t pos = 0;
  if (spec.think_open && !read_thinking(spec, s, opts, final, &out, &pos)) return out;
  if (spec.layout == Layout::kGenericJson) parse_generic_json(s, pos, opts, final, &out);
  else parse_markers(spec, s, pos, opts, final, truncated, &out);
  return out;
}

}  // namespace qkv::toolcall::detail
