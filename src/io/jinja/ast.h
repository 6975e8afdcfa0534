// The parsed form of a Jinja template: expression and statement nodes, each
// with the line and column where it starts.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/jinja/value.h"

namespace hpcrl::io::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,    // value
    Name,       // name
    List,       // items
    Dict,       // items as key, value pairs
    Attr,       // items[0].name
    Item,       // items[0][items[1]]
    Slice,      // items[0][items[1]:items[2]:items[3]] (null = omitted)
    Call,       // items[0](items[1:], kwargs)
    Filter,     // items[0] | name(items[1:], kwargs)
    Test,       // items[0] is [not] name(items[1:]); negated
    Unary,      // op items[0]: "not", "-", "+"
    Binary,     // items[0] op items[1]: arithmetic, comparison, in, not in, and, or, ~
    Cond,       // items[0] if items[1] else items[2] (items[2] null = Undefined)
  };
  Kind kind;
  int line = 0, column = 0;
  Value value;
  std::string name;  // Name, Attr, Call/Filter/Test name, operator
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches: (cond, body)...; else_body
    For,       // targets in expr [if filter]; body; else_body
    Set,       // targets (or target_object.attr) = expr, or {% set x %}body{% endset %}
    Macro,     // name(params with defaults) body
    Break,
    Continue,
  };
  Kind kind;
  int line = 0, column = 0;
  std::string text;
  ExprPtr expr, filter;
  std::vector<std::string> targets;  // For/Set names; Set with attr: {object, attribute}
  bool attr_target = false;          // Set: `ns.attr = ...`
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: name, default (may be null)
};

struct Program {
  Body body;
};

}  // namespace hpcrl::io::jinja
