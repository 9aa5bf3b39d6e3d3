// ctest-labels: asan
// The Jinja interpreter: statements, expressions, filters, tests, methods and
// whitespace control as Python's jinja2 (with Hugging Face's settings) renders
// them, its error messages, its limits on hostile templates, and the C API's
// chat render call.
#include <doctest/doctest.h>

#include <string>

#include "include/qkv.h"
#include "runtime/chat_template.h"
#include "runtime/jinja/jinja.h"
#include "tests/shared_data.h"

using namespace qkv;

namespace {

std::string render(const std::string& src, const std::string& json = "[]") {
  ChatTemplate t;
  t.source = src;
  t.bos_token = "<s>";
  t.eos_token = "</s>";
  return render_chat(t, json.front() == '{' ? json : "{\"messages\": " + json + "}", true);
}

std::string error_of(const std::string& src, const std::string& json = "[]") {
  try {
    render(src, json);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("statements: if/elif/else, for with loop variables, filters and else, set, namespace") {
  CHECK(render("{% if 1 > 2 %}a{% elif 2 > 1 %}b{% else %}c{% endif %}") == "b");
  CHECK(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}") ==
        "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
  CHECK(render("{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}") == "2/2 4/2 ");
  CHECK(render("{% for x in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}") == "02");
  CHECK(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}") == "1");
  CHECK(render("{% set ns = namespace(x=1) %}{% for i in [1] %}{% set ns.x = 2 %}{% endfor %}{{ ns.x }}") == "2");
  CHECK(render("{% set b %}in {{ 1 + 1 }}{% endset %}[{{ b }}]") == "[in 2]");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}") == "a=1,b=2,");
}

TEST_CASE("macros and call blocks") {
  CHECK(render("{% macro m(a, b='d') %}<{{ a }}|{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}") == "<1|d><2|3>");
  CHECK(render("{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}inner{% endcall %}") == "[inner]");
}

TEST_CASE("expressions: operators, in, ~, slicing, inline if, literals, attribute and item access") {
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }}") == "3 -4 1 3.5 1024 7");
  CHECK(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' in 'xaby' }} {{ 3 not in [1, 2] }}") == "a1None True True");
  CHECK(render("{{ 'hello'[::-1] }} {{ [1,2,3,4][1:3] }} {{ 'héllo'[1] }} {{ [1,2,3][-1] }}") == "olleh [2, 3] é 3");
  CHECK(render("{{ 'y' if 0 else 'n' }} {{ {'k': [1, 'two', true, none, 1.5]} }}") == "n {'k': [1, 'two', True, None, 1.5]}");
  CHECK(render("{{ messages[0].role }} {{ messages[0]['content'] }} [{{ messages[0].missing }}]",
               "[{\"role\": \"user\", \"content\": \"hi\"}]") == "user hi []");
  CHECK(render("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 0.0001 }} {{ 0.00001 }}") == "0.30000000000000004 1e+20 1.0 0.0001 1e-05");
}

TEST_CASE("filters") {
  CHECK(render("{{ '  x  ' | trim }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ 'hello world' | capitalize }}") == "x|ABab|Hello world");
  CHECK(render("{{ {'a': 'é\"\\n', 'b': [1, 2.5, true, none]} | tojson }}") == "{\"a\": \"é\\\"\\n\", \"b\": [1, 2.5, true, null]}");
  CHECK(render("{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}") == "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
  CHECK(render("{{ [1, 2] | length }} {{ 'abc' | replace('b', 'X') }} {{ [1, 2] | join(', ') }} {{ x | default('d') }}") == "2 aXc 1, 2 d");
  CHECK(render("{{ [3, 4] | first }}{{ [3, 4] | last }} {{ '5' | int + 1 }} {{ 'ab' | list }} {{ 3 | string }}") == "34 6 ['a', 'b'] 3");
  CHECK(render("{{ [{'a': 1}, {'a': 2}] | map(attribute='a') | list }} {{ [1, 2, 3] | select('odd') | list }}") == "[1, 2] [1, 3]");
  CHECK(render("{{ [{'t': 'x'}, {'t': 'y'}] | selectattr('t', 'equalto', 'y') | list }} {{ [{'t': 'x'}] | rejectattr('t', 'equalto', 'x') | list }}") ==
        "[{'t': 'y'}] []");
  CHECK(render("{% for k, v in {'a': 1} | items %}{{ k }}{{ v }}{% endfor %}") == "a1");
}

TEST_CASE("tests and methods") {
  CHECK(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ {} is mapping }}") ==
        "False True True True True True");
  CHECK(render("{{ [] is iterable }} {{ 'a' is sequence }} {{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ 2 is equalto 2 }}") ==
        "True True True True False True");
  CHECK(render("{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ ' a '.strip() }}|{{ 'xax'.lstrip('x') }}|{{ 'a b  c'.split() }} {{ 'a,b'.split(',') }}") ==
        "True True a|ax|['a', 'b', 'c'] ['a', 'b']");
  CHECK(render("{{ 'ab cd'.title() }} {{ 'aXa'.replace('a', 'b') }} {{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 9) }} {{ {'a': 1}.keys() | list }}") ==
        "Ab Cd bXb 1 9 ['a']");
}

TEST_CASE("whitespace control: '-', trim_blocks and lstrip_blocks as Hugging Face sets them") {
  CHECK(render("a  {%- if true %}  b  {%- endif %}\n") == "a  b");
  CHECK(render("x\n  {% if true %}\ny\n  {% endif %}\nz") == "x\ny\nz");
  CHECK(render("x {% if true %}y{% endif %}") == "x y");
  CHECK(render("a\n{# c #}\nb") == "a\nb");
  CHECK(render("{{ 'a' }}\n{{- 'b' }}") == "ab");
  CHECK(render("{% raw %}{{ x }}{% endraw %}") == "{{ x }}");
}

TEST_CASE("raise_exception and errors with line and column") {
  try {
    render("{{ raise_exception('System role not supported') }}");
    FAIL("no error");
  } catch (const jinja::TemplateRaise& e) {
    CHECK(std::string(e.what()) == "System role not supported");
  }
  CHECK(error_of("\n  {{ x.y }}") == "template line 2 column 7: 'x' is undefined");
  CHECK(error_of("{% for %}") .find("line 1 column 8") != std::string::npos);
  CHECK(error_of("{{ 1 +") .find("unterminated '{{'") != std::string::npos);
  CHECK(error_of("{% if x %}") .find("unexpected end of template") != std::string::npos);
  CHECK(error_of("{% include 'x' %}").find("unsupported statement 'include'") != std::string::npos);
  CHECK(error_of("{{ x | nosuch }}").find("no filter named 'nosuch'") != std::string::npos);
  CHECK(error_of("{{ 'a' + 1 }}").find("unsupported operand") != std::string::npos);
  CHECK(error_of("{{ 1 // 0 }}").find("by zero") != std::string::npos);
  CHECK(error_of("{{ 'unterminated }}").find("unterminated string") != std::string::npos);
  CHECK(error_of("[1,", "").find("not valid JSON") != std::string::npos);
  // A number past double's range is nlohmann's out_of_range, not a parse_error.
  CHECK_THROWS_AS(render("x", "[{\"role\": 3e3333333}]"), qkv::Error);
  CHECK(error_of("x", "[{\"role\": 3e3333333}]").find("not valid JSON") != std::string::npos);
}

TEST_CASE("hostile templates hit limits, not the stack or memory") {
  CHECK(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply") != std::string::npos);
  CHECK(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested too deeply") != std::string::npos);
  jinja::Limits small;
  small.max_steps = 100000;
  CHECK_THROWS_WITH(jinja::Template("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}")
                        .render(jinja::Value::dict(), small),
                    doctest::Contains("step budget"));
  CHECK(error_of("{{ 'x' * 100000000 }}").find("too large") != std::string::npos);
  CHECK(error_of("{% set s = 'xxxxxxxxxxxxxxxx' %}{% for i in range(30) %}{% set s = s ~ s %}{% endfor %}").find("too large") !=
        std::string::npos);
  CHECK(error_of("{{ 9223372036854775807 + 1 }}").find("overflow") != std::string::npos);
  // range() near the ends of int64: the step past the last value would overflow.
  CHECK(render("{% for i in range(9223372036854775806, 9223372036854775807, 5) %}{{ i }};{% endfor %}") ==
        "9223372036854775806;");
  CHECK(render("{% for i in range(-9223372036854775807, -9223372036854775807 - 1, -3) %}{{ i }};{% endfor %}") ==
        "-9223372036854775807;");
  CHECK(render("{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904) | length }}") == "4");
}

TEST_CASE("C API: qkv_chat_render with a template given and the model's BOS/EOS") {
  if (!test::have_shared("models/stories260K.gguf")) return;
  qkv_model* m = nullptr;
  REQUIRE(qkv_model_load(test::shared_path("models/stories260K.gguf").c_str(), nullptr, &m) == QKV_OK);
  const char* tmpl = "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
  const char* conv = "[{\"role\": \"user\", \"content\": \"Once upon a time\"}]";
  int64_t n = -1;
  CHECK(qkv_chat_render(m, tmpl, conv, 1, nullptr, 0, &n) == QKV_ERR_BUFFER_TOO_SMALL);
  std::string buf(static_cast<size_t>(n) + 1, '\0');
  REQUIRE(qkv_chat_render(m, tmpl, conv, 1, buf.data(), n + 1, &n) == QKV_OK);
  CHECK(std::string(buf.c_str()) == "<s>[user] Once upon a time\n[assistant] ");
  CHECK(qkv_has_chat_template(m) == 0);
  CHECK(qkv_has_chat_template(nullptr) == 0);
  CHECK(qkv_chat_render(m, nullptr, conv, 1, nullptr, 0, &n) == QKV_ERR_INVALID_ARGUMENT);  // no template in the file
  CHECK(std::string(qkv_last_error()).find("no chat template") != std::string::npos);
  CHECK(qkv_chat_render(m, "{{ raise_exception('nope') }}", conv, 1, nullptr, 0, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()) == "nope");
  qkv_model_free(m);
}
