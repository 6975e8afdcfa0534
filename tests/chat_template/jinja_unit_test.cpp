// The pieces of hpcrl's Jinja interpreter (hpcrl/io/jinja.h), one behaviour
// per test; every expected text is what Python's jinja2 renders in HF's
// environment (trim_blocks, lstrip_blocks) for the same template.
#include <gtest/gtest.h>

#include <string>

#include "hpcrl/io/jinja.h"
#include "hpcrl/util/error.h"

namespace hpcrl::io::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string render(const std::string& text, const json& ctx = json::object(), RenderOptions opts = {}) {
  return Template::compile(text, "t").render(ctx, opts);
}

// The InputError message of rendering (or compiling) `text`; "" if none.
std::string error_of(const std::string& text, const json& ctx = json::object(), RenderOptions opts = {}) {
  try {
    render(text, ctx, opts);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaWhitespace, MinusStripsAllWhitespaceOnItsSide) {
  // "a" + "  " (stripped by {%-) + "  b  " (both sides stripped) + "  c" (stripped by -%}).
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
}

TEST(JinjaWhitespace, TrimBlocksDropsTheNewlineAfterABlockTag) {
  // "{% if true %}\n" -> "", "x\n", "{% endif %}\n" -> "", "y".
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
}

TEST(JinjaWhitespace, LstripBlocksStripsIndentBeforeBlockTagsOnly) {
  // The indent before {% if %} goes; the one before {{ 'y' }} stays.
  EXPECT_EQ(render("  {% if true %}x{% endif %}|  {{ 'y' }}"), "x|  y");
}

TEST(JinjaWhitespace, PlusKeepsTheIndentBeforeABlockTag) {
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(JinjaLoop, LoopVariablesPerIteration) {
  // index0 index first last length per item: 0 1 True False 3; 1 2 False False 3; 2 3 False True 3.
  EXPECT_EQ(render("{% for x in ['a','b','c'] %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }};{% endfor %}"),
            "01TrueFalse3;12FalseFalse3;23FalseTrue3;");
}

TEST(JinjaLoop, ElseRunsWhenNothingIsIterated) {
  EXPECT_EQ(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
}

TEST(JinjaLoop, IfFilterCountsOnlyTheKeptItems) {
  // [1,2,3,4] keeps 2 and 4, numbered 1 and 2.
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ loop.index }}:{{ x }} {% endfor %}"), "1:2 2:4 ");
}

TEST(JinjaLoop, TupleUnpackingKeepsDictInsertionOrder) {
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", json::parse(R"({"d": {"b": 1, "a": 2}})")),
            "b=1;a=2;");
}

TEST(JinjaScope, NamespaceCarriesStateOutOfALoopAndPlainSetDoesNot) {
  // ns.n = 1 + 2 + 3 = 6; `set m` inside the loop is local to each iteration, so the outer m stays 0.
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% set m = 0 %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}"
                   "{% set m = m + i %}{% endfor %}{{ ns.n }} {{ m }}"),
            "6 0");
}

TEST(JinjaFilters, TojsonKeepsNonAsciiAndKeyOrderAndIndents) {
  json ctx = json::parse(R"({"x": {"z": "é\"\n", "a": [1, 2.5, null, true]}})");
  EXPECT_EQ(render("{{ x | tojson }}", ctx), "{\"z\": \"é\\\"\\n\", \"a\": [1, 2.5, null, true]}");
  EXPECT_EQ(render("{{ x | tojson(indent=2) }}", ctx),
            "{\n  \"z\": \"é\\\"\\n\",\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
}

TEST(JinjaFilters, SelectattrMapJoinChain) {
  json ctx = json::parse(R"({"xs": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"},
                                    {"role": "user", "content": "c"}]})");
  EXPECT_EQ(render("{{ xs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}", ctx),
            "a,c");
}

TEST(JinjaFilters, StringAndSequenceFilters) {
  // AB ab "Hello world" None(default applies only to undefined) d 3+1=4 x_y 3 4 len('abc')=3.
  EXPECT_EQ(render("{{ 'ab' | upper }}{{ 'AB' | lower }}{{ 'hello world' | capitalize }}{{ none | default('d') }}"
                   "{{ missing | default('d') }}{{ '3' | int + 1 }}{{ 'x y' | replace(' ', '_') }}{{ [3,4] | first }}"
                   "{{ [3,4] | last }}{{ 'abc' | length }}"),
            "ABabHello worldNoned4x_y343");
}

TEST(JinjaFilters, UnknownFilterIsACompileErrorWithItsLineAndColumn) {
  // Line 2; "{{ x | " is 7 characters, so the filter name starts at column 8.
  std::string msg = error_of("line one\n{{ x | nosuch }}");
  EXPECT_NE(msg.find("t:2:8: no filter named 'nosuch'"), std::string::npos) << msg;
}

TEST(JinjaGlobals, RaiseExceptionBecomesAnInputErrorWithTheMessage) {
  std::string msg = error_of("ok\n  {{ raise_exception('roles must alternate') }}");
  EXPECT_NE(msg.find("roles must alternate"), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("t:2:", 0), 0u) << msg;  // located on the template's line 2
}

TEST(JinjaGlobals, StrftimeNowUsesTheCallersDate) {
  RenderOptions opts;
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 6;  // July
  t.tm_mday = 26;
  opts.now = t;
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}", json::object(), opts), "26 Jul 2024");
}

TEST(JinjaUndefined, PrintsEmptyTestsFalseAndIsNotDefined) {
  EXPECT_EQ(render("{{ missing }}|{{ missing is defined }}|{{ 'no' if missing else 'yes' }}"), "|False|yes");
}

TEST(JinjaUndefined, AttributeOfAnUndefinedIsAnError) {
  std::string msg = error_of("{{ missing.content }}");
  EXPECT_NE(msg.find("'missing' is undefined"), std::string::npos) << msg;
}

TEST(JinjaExpressions, SlicesAndNegativeIndexes) {
  // [1,2,3] reversed; 'abcdé' from 1 (by code point); last char; [1..5][1:4:2] = [2, 4].
  EXPECT_EQ(render("{{ [1,2,3][::-1] }} {{ 'abcdé'[1:] }} {{ 'abc'[-1] }} {{ [1,2,3,4,5][1:4:2] }}"),
            "[3, 2, 1] bcdé c [2, 4]");
}

TEST(JinjaExpressions, StringMethodsAsInQwenTemplates) {
  EXPECT_EQ(render("{{ 'a</think>\\n\\nb'.split('</think>')[-1].lstrip('\\n') }}|{{ '  x '.strip() }}|"
                   "{{ 'abc'.startswith('ab') }}"),
            "b|x|True");
}

TEST(JinjaExpressions, PythonArithmeticAndPrinting) {
  // 1/2 = 0.5; 7//2 = 3; -7//2 = floor(-3.5) = -4; -7 % 3 = 2 (sign of the divisor); 2**10 = 1024.
  EXPECT_EQ(render("{{ [1, 'a', none, true] }} {{ 1/2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} "
                   "{{ 1 ~ 'x' }}"),
            "[1, 'a', None, True] 0.5 3 -4 2 1024 1x");
}

TEST(JinjaExpressions, MembershipTests) {
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }}"), "True True True");
}

TEST(JinjaMacro, DefaultsAndKeywordArguments) {
  EXPECT_EQ(render("{% macro tag(name, body='-') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}"
                   "{{ tag('a') }}{{ tag('b', body='x') }}"),
            "<a>-</a><b>x</b>");
}

TEST(JinjaGuards, RunawayLoopStopsAtTheStepLimit) {
  RenderOptions opts;
  opts.max_steps = 10000;  // 1000 x 1000 iterations need over 10^6 steps
  std::string msg = error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                             json::object(), opts);
  EXPECT_NE(msg.find("max_steps"), std::string::npos) << msg;
}

TEST(JinjaGuards, OutputLimit) {
  RenderOptions opts;
  opts.max_output_bytes = 100;  // 200 iterations of "x" write 200 bytes
  std::string msg = error_of("{% for i in range(200) %}x{% endfor %}", json::object(), opts);
  EXPECT_NE(msg.find("max_output_bytes"), std::string::npos) << msg;
}

TEST(JinjaGuards, EndlessMacroRecursionIsAnError) {
  std::string msg = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("nests deeper than 500 calls"), std::string::npos) << msg;
}

TEST(JinjaGuards, DeeplyNestedExpressionIsASyntaxError) {
  // 1000 opening parentheses exceed the 200-level nesting limit.
  std::string msg = error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}");
  EXPECT_NE(msg.find("nest deeper than 200 levels"), std::string::npos) << msg;
}

TEST(JinjaSyntax, MissingEndTagNamesIt) {
  std::string msg = error_of("{% if x %}open");
  EXPECT_NE(msg.find("missing {% endif %}"), std::string::npos) << msg;
}

TEST(JinjaSyntax, UnsupportedTagIsRefusedWithItsLocation) {
  std::string msg = error_of("ok\n{% include 'x' %}");
  EXPECT_NE(msg.find("t:2:4: the tag {% include %} is not supported"), std::string::npos) << msg;
}

}  // namespace
}  // namespace hpcrl::io::jinja
