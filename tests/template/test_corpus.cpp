// Every chat template of the corpus over every conversation, and every snippet, must render
// byte for byte as Python's jinja2 renders it in transformers' environment
// (tests/reference/make_template_corpus.py writes tests/data/tokenizer/template_corpus.json);
// a case jinja2 rejects must be rejected with Error(invalid_argument) naming a template line.
#include "template/builtins.hpp"
#include "template/template.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

using namespace ember;
using jinja::Value;

namespace {

// ordered_json: the inputs keep their key order, as Python's dicts do.
using Json = nlohmann::ordered_json;

const Json& corpus() {
  static const Json j = Json::parse(test::read_file(test::data_path("tokenizer/template_corpus.json")));
  return j;
}

// The script pins strftime_now to 2026-07-26T09:30:00.
std::vector<std::pair<std::string, Value>> variables_of(const Json& vars) {
  std::vector<std::pair<std::string, Value>> out;
  for (const auto& [k, v] : vars.items()) out.emplace_back(k, jinja::parse_json(v.dump()));
  out.emplace_back("strftime_now", jinja::strftime_function({2026, 7, 26, 9, 30, 0}));
  return out;
}

struct Outcome {
  bool matched = false;
  std::string detail;
};

Outcome run_case(const jinja::Template& t, const Json& c) {
  const auto vars = variables_of(c.contains("variables") ? c.at("variables") : corpus().at("snippet_variables"));
  try {
    const std::string got = t.render(vars);
    if (c.contains("error")) return {false, "rendered, jinja2 raised " + c.at("error").get<std::string>()};
    const std::string expected = c.at("output");
    if (got == expected) return {true, {}};
    std::size_t at = 0;
    while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
    return {false, "differs at byte " + std::to_string(at) + ": got '" + got.substr(at, 60) + "' expected '" +
                       expected.substr(at, 60) + "'"};
  } catch (const Error& e) {
    if (!c.contains("error")) return {false, std::string("threw: ") + e.what()};
    const bool named = std::string_view(e.what()).rfind("template line ", 0) == 0;
    return {named && e.code() == ErrorCode::invalid_argument, std::string("error without a line: ") + e.what()};
  }
}

}  // namespace

TEST_CASE("the chat-template corpus renders byte for byte as jinja2 renders it") {
  int total = 0, matched = 0, templates = 0;
  std::map<std::string, std::pair<int, int>> per_template;
  for (const auto& t : corpus().at("templates")) {
    const std::string name = t.at("name");
    const std::string source =
        test::read_file(test::data_path("tokenizer/templates/" + t.at("file").get<std::string>()));
    const jinja::Template tmpl(source);
    ++templates;
    for (const auto& c : t.at("cases")) {
      ++total;
      const Outcome o = run_case(tmpl, c);
      CHECK_MESSAGE(o.matched, name << " / " << c.at("conversation").get<std::string>() << ": " << o.detail);
      matched += o.matched;
      auto& [ok, n] = per_template[name];
      ok += o.matched;
      ++n;
    }
  }
  for (const auto& [name, counts] : per_template) {
    std::printf("  %-22s %3d/%3d identical\n", name.c_str(), counts.first, counts.second);
  }
  std::printf("template corpus: %d templates, %d/%d cases identical to jinja2\n", templates, matched, total);
  CHECK(templates >= 20);
  CHECK(total >= 500);
  CHECK(matched == total);
}

TEST_CASE("every snippet renders as jinja2 renders it") {
  int total = 0, matched = 0;
  for (const auto& c : corpus().at("snippets")) {
    ++total;
    const std::string source = c.at("source");
    Outcome o;
    try {
      o = run_case(jinja::Template(source), c);
    } catch (const Error& e) {
      o = {false, std::string("parse error: ") + e.what()};
    }
    CHECK_MESSAGE(o.matched, source << ": " << o.detail);
    matched += o.matched;
  }
  std::printf("snippets: %d/%d identical to jinja2\n", matched, total);
  CHECK(total >= 80);
}
