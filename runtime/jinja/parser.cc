// Recursive-descent parser with Jinja2's grammar and operator precedence
// (lowest first): x if c else y, or, and, not, comparisons and `in`, + -, ~,
// * / // %, **, unary -, then postfix . [] () and filters | and tests `is`.
#include <cstdlib>
#include <set>

#include "kernels/error.h"
#include "runtime/jinja/ast.h"
#include "runtime/jinja/lexer.h"

namespace qkv::jinja {

namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}

  Program run() {
    Program p;
    std::string end;
    p.body = body({}, &end);
    return p;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().kind == Token::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Token::kName && cur().text == n; }

  [[noreturn]] void error(const Pos& p, const std::string& what) const {
    fail("template line ", p.line, " column ", p.col, ": ", what);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Token::kText: return "text";
      case Token::kVarBegin: return "'{{'";
      case Token::kVarEnd: return "'}}'";
      case Token::kBlockBegin: return "'{%'";
      case Token::kBlockEnd: return "'%}'";
      case Token::kEnd: return "the end of the template";
      case Token::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) error(cur().pos, std::string("expected '") + op + "', found " + describe(cur()));
    ++i_;
  }
  std::string expect_name() {
    if (cur().kind != Token::kName) error(cur().pos, "expected a name, found " + describe(cur()));
    return t_[i_++].text;
  }
  void expect(Token::Kind k, const char* what) {
    if (cur().kind != k) error(cur().pos, std::string("expected ") + what + ", found " + describe(cur()));
    ++i_;
  }

  struct Guard {
    Guard(Parser* p, Pos pos) : p_(p) {
      if (++p_->depth_ > kMaxDepth) p_->error(pos, "template nested too deeply (over 200 levels)");
    }
    ~Guard() { --p_->depth_; }
    Parser* p_;
  };

  // Statements until a block tag whose keyword is in `ends` (left at the keyword, name in *end).
  Body body(const std::set<std::string>& ends, std::string* end) {
    Body out;
    while (true) {
      const Token& t = cur();
      if (t.kind == Token::kEnd) {
        if (!ends.empty()) {
          std::string list;
          for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
          error(t.pos, "unexpected end of template, expected " + list);
        }
        *end = "";
        return out;
      }
      if (t.kind == Token::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::kText;
        s->pos = t.pos;
        s->text = t.text;
        out.push_back(std::move(s));
        ++i_;
      } else if (t.kind == Token::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::kOutput;
        s->pos = t.pos;
        ++i_;
        s->expr = tuple_or_expr();
        expect(Token::kVarEnd, "'}}'");
        out.push_back(std::move(s));
      } else if (t.kind == Token::kBlockBegin) {
        const Token& kw = peek();
        if (kw.kind == Token::kName && ends.count(kw.text)) {
          ++i_;
          *end = kw.text;
          return out;
        }
        ++i_;
        out.push_back(statement());
      } else {
        error(t.pos, "unexpected " + describe(t));
      }
    }
  }

  void end_tag() { expect(Token::kBlockEnd, "'%}'"); }

  StmtP statement() {
    Guard g(this, cur().pos);
    auto s = std::make_unique<Stmt>();
    s->pos = cur().pos;
    if (cur().kind != Token::kName) error(cur().pos, "expected a statement keyword, found " + describe(cur()));
    const std::string kw = t_[i_++].text;
    std::string end;
    if (kw == "if") {
      s->kind = Stmt::kIf;
      s->conds.push_back(tuple_or_expr());
      end_tag();
      while (true) {
        s->bodies.push_back(body({"elif", "else", "endif"}, &end));
        ++i_;  // the keyword
        if (end == "elif") {
          s->conds.push_back(tuple_or_expr());
          end_tag();
        } else if (end == "else") {
          end_tag();
          s->bodies.push_back(body({"endif"}, &end));
          ++i_;
          end_tag();
          break;
        } else {
          end_tag();
          break;
        }
      }
    } else if (kw == "for") {
      s->kind = Stmt::kFor;
      s->targets.push_back(expect_name());
      while (is_op(",")) {
        ++i_;
        s->targets.push_back(expect_name());
      }
      if (!is_name("in")) error(cur().pos, "expected 'in' in a for loop, found " + describe(cur()));
      ++i_;
      s->expr = tuple_or_expr(/*no_cond=*/true);
      if (is_name("if")) {
        ++i_;
        s->cond = expression();
      }
      if (is_name("recursive")) error(cur().pos, "recursive for loops are not supported");
      end_tag();
      s->bodies.push_back(body({"else", "endfor"}, &end));
      ++i_;
      end_tag();
      if (end == "else") {
        s->bodies.push_back(body({"endfor"}, &end));
        ++i_;
        end_tag();
      }
    } else if (kw == "set") {
      s->targets.push_back(expect_name());
      if (is_op(".")) {
        ++i_;
        s->text = expect_name();
      }
      while (s->text.empty() && is_op(",")) {
        ++i_;
        s->targets.push_back(expect_name());
      }
      if (is_op("=")) {
        ++i_;
        s->kind = Stmt::kSet;
        s->expr = tuple_or_expr();
        end_tag();
      } else {
        if (s->targets.size() != 1 || !s->text.empty()) error(s->pos, "a block set assigns one plain name");
        s->kind = Stmt::kSetBlock;
        end_tag();
        s->bodies.push_back(body({"endset"}, &end));
        ++i_;
        end_tag();
      }
    } else if (kw == "macro") {
      s->kind = Stmt::kMacro;
      s->text = expect_name();
      params(s.get());
      end_tag();
      s->bodies.push_back(body({"endmacro"}, &end));
      ++i_;
      if (cur().kind == Token::kName) ++i_;  // {% endmacro name %}
      end_tag();
    } else if (kw == "call") {
      s->kind = Stmt::kCallBlock;
      if (is_op("(")) params(s.get());
      s->expr = expression();
      if (s->expr->kind != Expr::kCall) error(s->pos, "a call block needs a macro call");
      end_tag();
      s->bodies.push_back(body({"endcall"}, &end));
      ++i_;
      end_tag();
    } else if (kw == "filter") {
      s->kind = Stmt::kFilterBlock;
      auto hole = std::make_unique<Expr>();
      hole->kind = Expr::kLiteral;
      hole->pos = s->pos;
      s->expr = filter_chain(std::move(hole), /*first_without_pipe=*/true);
      end_tag();
      s->bodies.push_back(body({"endfilter"}, &end));
      ++i_;
      end_tag();
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::kBreak : Stmt::kContinue;
      end_tag();
    } else {
      error(s->pos, "unknown or unsupported statement '" + kw + "'");
    }
    return s;
  }

  void params(Stmt* s) {
    expect_op("(");
    while (!is_op(")")) {
      s->targets.push_back(expect_name());
      if (is_op("=")) {
        ++i_;
        s->defaults.push_back(expression());
      } else {
        s->defaults.push_back(nullptr);
      }
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }

  ExprP make(Expr::Kind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // An expression, or a bare tuple "a, b" (as in {% set x = a, b %}).
  ExprP tuple_or_expr(bool no_cond = false) {
    const Pos p = cur().pos;
    ExprP first = no_cond ? or_expr() : expression();
    if (!is_op(",")) return first;
    auto t = make(Expr::kTuple, p);
    t->kids.push_back(std::move(first));
    while (is_op(",")) {
      ++i_;
      if (cur().kind == Token::kBlockEnd || cur().kind == Token::kVarEnd) break;
      t->kids.push_back(no_cond ? or_expr() : expression());
    }
    return t;
  }

  ExprP expression() {
    Guard g(this, cur().pos);
    ExprP e = or_expr();
    while (is_name("if")) {
      const Pos p = cur().pos;
      ++i_;
      auto c = make(Expr::kCond, p);  // kids: cond, then, else
      c->kids.push_back(or_expr());
      c->kids.push_back(std::move(e));
      if (is_name("else")) {
        ++i_;
        c->kids.push_back(expression());
      } else {
        c->kids.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprP binary(const char* op, ExprP l, ExprP r, Pos p) {
    auto b = make(Expr::kBinary, p);
    b->name = op;
    b->kids.push_back(std::move(l));
    b->kids.push_back(std::move(r));
    return b;
  }

  ExprP or_expr() {
    ExprP l = and_expr();
    while (is_name("or")) {
      const Pos p = cur().pos;
      ++i_;
      l = binary("or", std::move(l), and_expr(), p);
    }
    return l;
  }
  ExprP and_expr() {
    ExprP l = not_expr();
    while (is_name("and")) {
      const Pos p = cur().pos;
      ++i_;
      l = binary("and", std::move(l), not_expr(), p);
    }
    return l;
  }
  ExprP not_expr() {
    if (is_name("not")) {
      Guard g(this, cur().pos);
      auto n = make(Expr::kNot, cur().pos);
      ++i_;
      n->kids.push_back(not_expr());
      return n;
    }
    return compare();
  }
  ExprP compare() {
    const Pos p = cur().pos;
    ExprP first = math1();
    std::unique_ptr<Expr> c;
    while (true) {
      std::string op;
      if (cur().kind == Token::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && peek().kind == Token::kName && peek().text == "in") {
        op = "notin";
        i_ += 2;
      } else {
        break;
      }
      if (!c) {
        c = make(Expr::kCompare, p);
        c->kids.push_back(std::move(first));
      }
      c->ops.push_back(op);
      c->kids.push_back(math1());
    }
    return c ? std::move(c) : std::move(first);
  }
  ExprP math1() {
    ExprP l = concat();
    while (is_op("+") || is_op("-")) {
      const Pos p = cur().pos;
      const char* op = cur().text == "+" ? "+" : "-";
      ++i_;
      l = binary(op, std::move(l), concat(), p);
    }
    return l;
  }
  ExprP concat() {
    ExprP l = math2();
    while (is_op("~")) {
      const Pos p = cur().pos;
      ++i_;
      l = binary("~", std::move(l), math2(), p);
    }
    return l;
  }
  ExprP math2() {
    ExprP l = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Pos p = cur().pos;
      static const char* kOps[] = {"*", "/", "//", "%"};
      const char* op = nullptr;
      for (const char* o : kOps)
        if (cur().text == o) op = o;
      ++i_;
      l = binary(op, std::move(l), power(), p);
    }
    return l;
  }
  ExprP power() {
    ExprP l = unary(true);
    while (is_op("**")) {
      const Pos p = cur().pos;
      ++i_;
      l = binary("**", std::move(l), unary(true), p);
    }
    return l;
  }
  ExprP unary(bool with_filter) {
    Guard g(this, cur().pos);
    ExprP e;
    if (is_op("-") || is_op("+")) {
      const Pos p = cur().pos;
      const bool neg = cur().text == "-";
      ++i_;
      ExprP x = unary(false);
      if (neg) {
        e = make(Expr::kNeg, p);
        e->kids.push_back(std::move(x));
      } else {
        e = std::move(x);
      }
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_chain(std::move(e), false);
    return e;
  }

  ExprP primary() {
    const Token& t = cur();
    const Pos p = t.pos;
    if (t.kind == Token::kName) {
      ++i_;
      auto e = make(Expr::kLiteral, p);
      if (t.text == "true" || t.text == "True") e->value = Value(true);
      else if (t.text == "false" || t.text == "False") e->value = Value(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = Expr::kName;
        e->name = t.text;
      }
      return e;
    }
    if (t.kind == Token::kString) {
      std::string s;
      while (cur().kind == Token::kString) s += t_[i_++].text;  // adjacent literals join
      auto e = make(Expr::kLiteral, p);
      e->value = Value(s);
      return e;
    }
    if (t.kind == Token::kInt || t.kind == Token::kFloat) {
      ++i_;
      auto e = make(Expr::kLiteral, p);
      if (t.kind == Token::kFloat) {
        e->value = Value(std::strtod(t.text.c_str(), nullptr));
      } else {
        errno = 0;
        const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) error(p, "integer literal " + t.text + " does not fit in 64 bits");
        e->value = Value(static_cast<int64_t>(v));
      }
      return e;
    }
    if (is_op("(")) {
      ++i_;
      if (is_op(")")) {
        ++i_;
        return make(Expr::kTuple, p);
      }
      ExprP first = expression();
      if (is_op(")")) {
        ++i_;
        return first;
      }
      auto tup = make(Expr::kTuple, p);
      tup->kids.push_back(std::move(first));
      while (is_op(",")) {
        ++i_;
        if (is_op(")")) break;
        tup->kids.push_back(expression());
      }
      expect_op(")");
      return tup;
    }
    if (is_op("[")) {
      ++i_;
      auto l = make(Expr::kList, p);
      while (!is_op("]")) {
        l->kids.push_back(expression());
        if (!is_op(",")) break;
        ++i_;
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      ++i_;
      auto d = make(Expr::kDict, p);
      while (!is_op("}")) {
        d->kids.push_back(expression());
        expect_op(":");
        d->kids.push_back(expression());
        if (!is_op(",")) break;
        ++i_;
      }
      expect_op("}");
      return d;
    }
    error(p, "unexpected " + describe(t) + " in an expression");
  }

  void call_args(Expr* e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) error(cur().pos, "*args and **kwargs in calls are not supported");
      if (cur().kind == Token::kName && peek().kind == Token::kOp && peek().text == "=") {
        e->ops.push_back(t_[i_].text);
        i_ += 2;
        e->kids.push_back(expression());
      } else {
        if (!e->ops.empty()) error(cur().pos, "a positional argument follows a keyword argument");
        e->kids.push_back(expression());
      }
      if (!is_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }

  ExprP postfix(ExprP e) {
    while (true) {
      const Pos p = cur().pos;
      if (is_op(".")) {
        ++i_;
        auto a = make(Expr::kAttr, p);
        if (cur().kind == Token::kInt) {  // x.0 is x[0]
          a->kind = Expr::kItem;
          a->kids.push_back(std::move(e));
          auto idx = make(Expr::kLiteral, cur().pos);
          idx->value = Value(static_cast<int64_t>(std::strtoll(cur().text.c_str(), nullptr, 10)));
          ++i_;
          a->kids.push_back(std::move(idx));
        } else {
          a->name = expect_name();
          a->kids.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (is_op("[")) {
        ++i_;
        ExprP parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = expression();
          if (k < 2 && is_op(":")) {
            slice = true;
            ++i_;
          } else {
            break;
          }
        }
        expect_op("]");
        auto it = make(slice ? Expr::kSlice : Expr::kItem, p);
        it->kids.push_back(std::move(e));
        if (!slice && !parts[0]) error(p, "empty subscript");
        for (int k = 0; k < (slice ? 3 : 1); ++k) it->kids.push_back(std::move(parts[k]));
        e = std::move(it);
      } else if (is_op("(")) {
        auto c = make(Expr::kCall, p);
        c->kids.push_back(std::move(e));
        call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprP filter_chain(ExprP e, bool first_without_pipe) {
    while (true) {
      const Pos p = cur().pos;
      if (is_op("|") || first_without_pipe) {
        if (!first_without_pipe) ++i_;
        first_without_pipe = false;
        auto f = make(Expr::kFilter, p);
        f->name = expect_name();
        while (is_op(".")) {
          ++i_;
          f->name += "." + expect_name();
        }
        f->kids.push_back(std::move(e));
        if (is_op("(")) call_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto t = make(Expr::kTest, p);
        if (is_name("not")) {
          t->negated = true;
          ++i_;
        }
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        if (is_op("(")) {
          call_args(t.get());
        } else if ((cur().kind == Token::kName && cur().text != "else" && cur().text != "and" &&
                    cur().text != "or" && cur().text != "if" && cur().text != "is" && cur().text != "in" &&
                    cur().text != "not") ||
                   cur().kind == Token::kString || cur().kind == Token::kInt || cur().kind == Token::kFloat ||
                   is_op("[") || is_op("{") || is_op("-")) {
          t->kids.push_back(postfix(is_op("-") ? unary(false) : primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        auto c = make(Expr::kCall, p);
        c->kids.push_back(std::move(e));
        call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Program parse(const std::string& source) { return Parser(lex(source)).run(); }

}  // namespace qkv::jinja
