// Grammars that force tool calls in a family's own format: tool_choice
// "required" or a named function (the whole reply is calls to allowed
// functions whose arguments validate against their parameter schemas), and
// "auto" (a lazily triggered grammar: free text until the family's call
// opener appears, then the rest of the call is constrained). The parameter
// schemas go through the JSON Schema compiler; their rules are renamed per
// tool so that all of them live in one grammar.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/tool_calls/tool_calls.h"

namespace qkv::toolcall {

struct ToolSchema {
  std::string name;
  nlohmann::ordered_json parameters;
};

struct CallGrammar {
  std::string gbnf;
  // Lazy grammars: the texts that start them (the grammar matches what
  // follows). Empty: the grammar applies from the first token.
  std::vector<std::string> triggers;
};

// lazy: for tool_choice "auto" (the grammar waits for the opener); otherwise
// the reply must be calls. parallel: more than one call allowed. Throws
// qkv::Error naming the tool whose parameters cannot be compiled.
CallGrammar tool_call_grammar(Family family, const std::vector<ToolSchema>& tools, bool parallel, bool lazy);

// GBNF text with every rule name prefixed (literals, classes, repetition
// counts and comments untouched), so that grammars compiled apart can share one text.
std::string prefix_rule_names(const std::string& gbnf, const std::string& prefix);

}  // namespace qkv::toolcall
