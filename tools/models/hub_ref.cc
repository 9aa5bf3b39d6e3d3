#include "tools/models/hub_ref.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "kernels/error.h"

namespace qkv::tools::models {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with_gguf(const std::string& s) { return s.size() > 5 && lower(s.substr(s.size() - 5)) == ".gguf"; }

// The hub's rule for owner and repository names: letters, digits, '-', '_', '.'
// (no leading '.' here, which keeps "." and ".." out of cache paths).
void check_name_part(const std::string& part, const std::string& text) {
  if (part.empty() || part.size() > 96 || part[0] == '.') {
    fail("'", text, "' is not OWNER/REPO[:QUANT] or OWNER/REPO/FILE.gguf");
  }
  for (char c : part) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      fail("'", text, "': the hub's owner and repository names hold letters, digits, '-', '_' and '.', not '", c, "'");
    }
  }
}

// A split part's name: STEM-0000K-of-0000N.gguf. Returns false for other names.
bool split_part(const std::string& name, std::string* stem, int* k, int* n) {
  const size_t len = name.size();
  if (len < 5 + 15 || !ends_with_gguf(name)) return false;
  const std::string tail = name.substr(len - 5 - 15, 15);  // -00001-of-00003
  if (tail[0] != '-' || tail.compare(6, 4, "-of-") != 0) return false;
  for (size_t i : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14}) {
    if (!std::isdigit(static_cast<unsigned char>(tail[i]))) return false;
  }
  *stem = name.substr(0, len - 5 - 15);
  *k = std::stoi(tail.substr(1, 5));
  *n = std::stoi(tail.substr(10, 5));
  return *k >= 1 && *n >= 1 && *k <= *n;
}

// Whether tag occurs in name as a whole word: case-insensitive, not inside a
// longer label (Q4_K in Q4_K_M, Q4_0 in IQ4_0 do not count).
bool has_tag(const std::string& name, const std::string& tag) {
  const std::string n = lower(name), t = lower(tag);
  for (size_t at = n.find(t); at != std::string::npos; at = n.find(t, at + 1)) {
    const bool open = at == 0 || !std::isalnum(static_cast<unsigned char>(n[at - 1]));
    const size_t end = at + t.size();
    const bool close = end == n.size() || (!std::isalnum(static_cast<unsigned char>(n[end])) && n[end] != '_');
    if (open && close) return true;
  }
  return false;
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::string available(const std::vector<GgufChoice>& choices) {
  std::string s;
  for (const GgufChoice& c : choices) s += (s.empty() ? "" : ", ") + c.quant + " (" + c.files[0] + ")";
  return s.empty() ? "none: the repository holds no GGUF file" : s;
}

}  // namespace

HubRef parse_hub_ref(const std::string& given) {
  // The hf: prefix -m takes and qkv list prints.
  const std::string text = given.rfind("hf://", 0) == 0 ? given.substr(5) : given.rfind("hf:", 0) == 0 ? given.substr(3) : given;
  HubRef ref;
  const size_t slash = text.find('/');
  if (slash == std::string::npos) fail("'", text, "' is not OWNER/REPO[:QUANT] or OWNER/REPO/FILE.gguf");
  const size_t slash2 = text.find('/', slash + 1);
  std::string repo_part = text.substr(0, slash2);
  if (slash2 != std::string::npos) {
    ref.file = text.substr(slash2 + 1);
    if (!ends_with_gguf(ref.file)) fail("'", text, "': the file named after OWNER/REPO/ must be a .gguf file");
    size_t b = 0;
    while (b <= ref.file.size()) {
      const size_t e = std::min(ref.file.find('/', b), ref.file.size());
      const std::string seg = ref.file.substr(b, e - b);
      if (seg.empty() || seg == "." || seg == "..") fail("'", text, "': the file path has an empty, '.' or '..' part");
      b = e + 1;
    }
  } else {
    const size_t colon = repo_part.find(':');
    if (colon != std::string::npos) {
      ref.quant = repo_part.substr(colon + 1);
      repo_part.resize(colon);
      if (ref.quant.empty()) fail("'", text, "': the quant tag after ':' is empty");
      for (char c : ref.quant) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
          fail("'", text, "': a quant tag holds letters, digits, '_', '-' and '.', not '", c, "'");
        }
      }
    }
  }
  check_name_part(repo_part.substr(0, slash), text);
  check_name_part(repo_part.substr(slash + 1), text);
  ref.repo = repo_part;
  return ref;
}

std::string quant_label(const std::string& file_name) {
  std::string name = base_name(file_name);
  std::string stem;
  int k = 0, n = 0;
  if (split_part(name, &stem, &k, &n)) {
    name = stem;
  } else if (ends_with_gguf(name)) {
    name.resize(name.size() - 5);
  }
  const size_t cut = name.find_last_of("-.");
  return cut == std::string::npos ? name : name.substr(cut + 1);
}

std::vector<GgufChoice> gguf_choices(const std::vector<std::string>& repo_files) {
  std::vector<GgufChoice> out;
  struct Split {
    int parts = 0;
    std::map<int, std::string> have;
  };
  std::map<std::string, Split> splits;
  for (const std::string& f : repo_files) {
    if (!ends_with_gguf(f) || lower(base_name(f)).find("mmproj") != std::string::npos) continue;
    std::string stem;
    int k = 0, n = 0;
    if (split_part(f, &stem, &k, &n)) {
      Split& s = splits[stem];
      if (s.parts != 0 && s.parts != n) fail("the split model ", stem, " names both ", s.parts, " and ", n, " parts");
      s.parts = n;
      s.have[k] = f;
    } else {
      out.push_back({quant_label(f), {f}});
    }
  }
  for (const auto& [stem, s] : splits) {
    GgufChoice c{quant_label(s.have.begin()->second), {}};
    for (int k = 1; k <= s.parts; ++k) {
      const auto it = s.have.find(k);
      if (it == s.have.end()) fail("the split model ", stem, " lacks part ", k, " of ", s.parts);
      c.files.push_back(it->second);
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const GgufChoice& a, const GgufChoice& b) { return a.files[0] < b.files[0]; });
  return out;
}

GgufChoice choose_gguf(const std::vector<GgufChoice>& choices, const HubRef& ref) {
  if (!ref.file.empty()) {
    for (const GgufChoice& c : choices) {
      if (std::find(c.files.begin(), c.files.end(), ref.file) != c.files.end()) return c;
    }
    fail(ref.repo, " has no file ", ref.file, "; its GGUF models: ", available(choices));
  }
  const std::string tag = ref.quant.empty() ? kDefaultQuant : ref.quant;
  std::vector<const GgufChoice*> hits;
  for (const GgufChoice& c : choices) {
    if (has_tag(base_name(c.files[0]), tag)) hits.push_back(&c);
  }
  if (hits.size() == 1) return *hits[0];
  if (hits.empty() && ref.quant.empty() && choices.size() == 1) return choices[0];
  if (hits.empty()) fail(ref.repo, " has no GGUF file tagged ", tag, "; available: ", available(choices));
  std::string names;
  for (const GgufChoice* c : hits) names += (names.empty() ? "" : ", ") + c->files[0];
  fail(ref.repo, ":", tag, " matches several files (", names, "); name one as ", ref.repo, "/FILE.gguf");
}

}  // namespace qkv::tools::models
