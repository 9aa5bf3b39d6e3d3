// The syntax tree of a parsed template: expressions and statements, each with
// the line and column it started at (for error messages).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/jinja/value.h"

namespace qkv::jinja {

struct Pos {
  int line = 1, col = 1;
};

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral,   // value
    kName,      // name
    kAttr,      // a.name
    kItem,      // a[b]
    kSlice,     // a[b:c:d] (kids 1..3 may be null)
    kCall,      // a(args...; kw_names for the last kw_names.size() args)
    kFilter,    // a | name(args)
    kTest,      // a is [not] name(args)
    kNeg,       // -a
    kNot,       // not a
    kBinary,    // a op b (op: + - * / // % ** ~ and or)
    kCompare,   // a op b op c ... (ops)
    kCond,      // b if a else c  (kids: cond, then, else (may be null))
    kList,      // [a, b]
    kTuple,     // (a, b)
    kDict,      // {k: v, ...} (kids alternate key, value)
  };
  Kind kind;
  Pos pos;
  Value value;                    // kLiteral
  std::string name;               // kName / kAttr / kFilter / kTest / kBinary op
  std::vector<ExprP> kids;        // operands, arguments
  std::vector<std::string> ops;   // kCompare operators; kCall/kFilter/kTest keyword names
  bool negated = false;           // kTest: "is not"
};

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

struct Stmt {
  enum Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conds[i] -> bodies[i]; bodies.size() == conds.size() + 1 when there is an else
    kFor,       // for targets in expr [if cond]: bodies[0], else bodies[1]
    kSet,       // set targets = expr, or set target.attr = expr (attr)
    kSetBlock,  // set target %}bodies[0]{% endset
    kMacro,     // macro name(params = defaults): bodies[0]
    kCallBlock, // call(params) expr: bodies[0] is the caller
    kFilterBlock, // filter expr (a kFilter on a placeholder): bodies[0]
    kBreak,
    kContinue,
  };
  Kind kind;
  Pos pos;
  std::string text;                  // kText; kSet attribute; kMacro name
  ExprP expr;                        // output / for iterable / set value / call / filter
  ExprP cond;                        // for's filter
  std::vector<ExprP> conds;          // kIf
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // for / set names, macro / caller parameters
  std::vector<ExprP> defaults;       // macro parameter defaults (null when none), aligned with targets
};

// The parsed template. parse() throws qkv::Error with "line L column C: ..." on a syntax error.
struct Program {
  Body body;
};
Program parse(const std::string& source);

}  // namespace qkv::jinja
