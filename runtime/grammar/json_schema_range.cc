// The decimal integers between two bounds as a grammar, digit by digit.
//
// Numbers of different lengths are handled length by length. Between two
// numbers x <= y of the same length the set splits at the first digit: x's
// first digit followed by suffixes >= x's suffix, the digits strictly between
// followed by anything, y's first digit followed by suffixes <= y's suffix.
// Each split recurses on one side only, so the grammar grows linearly with
// the number of digits.
#include <string>
#include <vector>

#include "runtime/grammar/json_schema_internal.h"

namespace qkv::grammar::schema_detail {

namespace {

std::string digits(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  if (lo == '0' && hi == '9') return "[0-9]";
  return std::string("[") + lo + "-" + hi + "]";
}

// Any n digits, or any between n and m digits when m > n.
std::string any_digits(int n, int m) {
  if (m <= 0) return "";
  if (n == m) return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
  return "[0-9]{" + std::to_string(n) + "," + std::to_string(m) + "}";
}

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string join_alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

bool all_of(const std::string& s, size_t from, char c) {
  return s.find_first_not_of(c, from) == std::string::npos;
}

// Digit strings of x.size() digits (leading zeros allowed) from x to y.
std::string same_length(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  const size_t n = x.size();
  if (x[0] == y[0]) return seq(digits(x[0], x[0]), same_length(x.substr(1), y.substr(1)));
  const bool x_rest_lowest = all_of(x, 1, '0');
  const bool y_rest_highest = all_of(y, 1, '9');
  const char full_lo = x_rest_lowest ? x[0] : static_cast<char>(x[0] + 1);
  const char full_hi = y_rest_highest ? y[0] : static_cast<char>(y[0] - 1);
  std::vector<std::string> alts;
  if (!x_rest_lowest) alts.push_back(seq(digits(x[0], x[0]), same_length(x.substr(1), std::string(n - 1, '9'))));
  if (full_lo <= full_hi) {
    alts.push_back(seq(digits(full_lo, full_hi), any_digits(static_cast<int>(n - 1), static_cast<int>(n - 1))));
  }
  if (!y_rest_highest) alts.push_back(seq(digits(y[0], y[0]), same_length(std::string(n - 1, '0'), y.substr(1))));
  return join_alternatives(alts);
}

std::string power_of_ten(size_t zeros) { return "1" + std::string(zeros, '0'); }

// Non-negative integers in [a, b] (a <= b), as alternatives.
void unsigned_range(uint64_t a, uint64_t b, std::vector<std::string>& alts) {
  const std::string sa = std::to_string(a), sb = std::to_string(b);
  size_t len = sa.size();
  if (sa.size() == sb.size()) {
    alts.push_back(same_length(sa, sb));
    return;
  }
  alts.push_back(same_length(sa, std::string(len, '9')));
  // Lengths strictly between are complete: one alternative covers them all.
  if (len + 1 < sb.size()) {
    alts.push_back("[1-9] " + any_digits(static_cast<int>(len), static_cast<int>(sb.size() - 2)));
  }
  alts.push_back(same_length(power_of_ten(sb.size() - 1), sb));
}

// Non-negative integers >= a with at most max(max_digits, digits of a) digits.
void unsigned_at_least(uint64_t a, int max_digits, std::vector<std::string>& alts) {
  const std::string sa = std::to_string(a);
  const int len = static_cast<int>(sa.size());
  alts.push_back(same_length(sa, std::string(sa.size(), '9')));
  if (len < max_digits) alts.push_back("[1-9] " + any_digits(len, max_digits - 1));
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi, int max_digits) {
  std::vector<std::string> alts;
  // Negative values: "-" and a magnitude in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t mag_lo = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    std::vector<std::string> mags;
    if (lo) {
      unsigned_range(mag_lo, static_cast<uint64_t>(-*lo), mags);
    } else {
      unsigned_at_least(mag_lo, max_digits, mags);
    }
    alts.push_back("\"-\" " + join_alternatives(mags));
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    if (hi) {
      unsigned_range(from, static_cast<uint64_t>(*hi), alts);
    } else {
      unsigned_at_least(from, max_digits, alts);
    }
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

}  // namespace qkv::grammar::schema_detail
