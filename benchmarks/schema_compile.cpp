// ember-schema-compile: compiles JSON Schema files the way a request's json_schema is compiled
// (schema -> GBNF -> grammar -> matcher start state) and prints one JSON line per file:
// {"file", "status": "compiled" | "refused", "reason", "relaxed": [...], "compile_ms", "rules",
// "gbnf_bytes", "gbnf_fnv1a" (a hash of the grammar, to compare builds)}.
// benchmarks/schema_coverage.py runs it over SchemaStore's schemas. `--schema-dir DIR` (first)
// resolves remote $refs from the documents in DIR, as ember-server --schema-dir does.
#include "../examples/common/schema_dir.hpp"
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

int main(int argc, char** argv) {
  using namespace ember::grammar;
  ember::SchemaResolver resolver;
  int first = 1;
  if (argc > 2 && std::string(argv[1]) == "--schema-dir") {
    resolver = ember_examples::schema_dir_resolver(argv[2]);
    first = 3;
  }
  for (int i = first; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json out = {{"file", argv[i]}};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const SchemaGrammar g = compile_json_schema(text.str(), "root", resolver);
      const auto grammar = std::make_shared<const Grammar>(parse_gbnf(g.gbnf));
      Matcher matcher(grammar);
      out["status"] = "compiled";
      out["relaxed"] = g.relaxed;
      out["unique_rules"] = g.unique_rules.size();
      out["rules"] = grammar->rules.size();
      out["gbnf_bytes"] = g.gbnf.size();
      std::uint64_t fnv = 14695981039346656037ULL;  // FNV-1a: is the grammar the same as another build's
      for (const char c : g.gbnf) fnv = (fnv ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv));
      out["gbnf_fnv1a"] = hex;
    } catch (const std::exception& e) {
      out["status"] = "refused";
      out["reason"] = e.what();
    }
    out["compile_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << out.dump() << "\n" << std::flush;
  }
  return 0;
}
