// Stop strings over streamed text: pieces go in, the text that is safe to show
// comes out. Text that could still turn into a stop string (a suffix that is a
// prefix of one) is held back until the next piece decides it, so a stop string
// split across tokens is caught and none of it is ever shown.
#pragma once

#include <string>
#include <vector>

namespace qkv {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops = {});
  // Adds a piece; returns the text that can be shown now. After a stop string
  // is found, stopped() is true, the text before it is the last returned, and
  // further pieces return nothing.
  std::string feed(const std::string& piece);
  // The held-back text at the end of generation (no stop string followed).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string found

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace qkv
