#include "json_workload.hpp"

#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/token_mask.hpp"
#include "model/gguf.hpp"
#include "runtime/sampler.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <algorithm>
#include <chrono>
#include <memory>

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Schema {
  const char* prompt;
  const char* json;
};

const Schema kSchemas[] = {
    {"The blacksmith greets a knight who wants a sword.",
     R"({"type": "object", "properties": {"say": {"type": "string", "maxLength": 80},
        "action": {"enum": ["give", "attack", "flee", "trade"]}, "item": {"type": ["string", "null"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 20}}, "required": ["say", "action", "count"]})"},
    {"Describe a person.",
     R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
        "age": {"type": "integer", "minimum": 0, "maximum": 120}, "email": {"type": "string", "pattern": "^[a-z]{1,12}@[a-z]{1,12}[.](com|org)$"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}, "required": ["name", "age", "tags"]})"},
    {"An event for the calendar.",
     R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 40}, "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "time"}, "id": {"type": "string", "format": "uuid"}}, "required": ["title", "day", "at", "id"]})"},
    {"Call the weather tool for Paris.",
     R"({"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": false}}, "required": ["name", "arguments"], "additionalProperties": false})"},
};

const Schema kUniqueSchema = {
    "Tag a blog post about Rust and list its authors.",
    R"({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true, "maxItems": 6,
        "items": {"type": "string", "maxLength": 20}}, "authors": {"type": "array", "uniqueItems": true, "maxItems": 3,
        "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30}}, "required": ["name"],
        "additionalProperties": false}}}, "required": ["tags", "authors"]})"};

Request request(const Schema& s, bool constrained, int max_tokens, float temperature, std::uint64_t seed) {
  Request r;
  r.messages = {{"system", "You answer with JSON only."}, {"user", s.prompt}};
  if (constrained)
    r.sampling.json_schema = s.json;
  else
    r.sampling.ignore_eos = true;  // the same number of tokens as the constrained run
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// kUniqueSchema's greedy tokens replayed with the uniqueItems check and without it (the same
// grammar, its arrays unmarked), each through apply() + accept() and through the sampler.
void measure_unique_items(Engine& engine, const std::shared_ptr<const grammar::TokenTrie>& trie, JsonRun& out) {
  const Completion c = engine.generate(request(kUniqueSchema, true, 160, 0.0f, 0));
  const grammar::SchemaGrammar sg = grammar::compile_json_schema(kUniqueSchema.json);
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(sg.gbnf));
  std::vector<float> row(static_cast<std::size_t>(trie->vocab_size()));
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<std::int32_t> no_history;
  std::vector<double> mask_us[2], check_us[2];
  for (int checked = 0; checked < 2; ++checked) {
    const auto fresh = [&] {
      auto compiled = std::make_shared<grammar::CompiledGrammar>(g, trie);
      if (checked) compiled->mark_unique_items(sg.unique_rules);
      return compiled;
    };
    grammar::TokenConstraint masked(fresh()), asked(fresh());
    runtime::Sampler sampler(greedy, trie->vocab_size());
    for (std::int32_t id : c.tokens) {
      std::fill(row.begin(), row.end(), 0.0f);
      auto t = Clock::now();
      masked.apply(row.data());
      masked.accept(id);
      mask_us[checked].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      std::fill(row.begin(), row.end(), 0.0f);
      row[static_cast<std::size_t>(id)] = 1.0f;
      t = Clock::now();
      asked.accept(sampler.sample(row.data(), no_history, nullptr, nullptr, &asked));
      check_us[checked].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
    }
  }
  out.unique_steps = static_cast<int>(c.tokens.size());
  out.unique_plain_mask_us_mean = mean_of(mask_us[0]);
  out.unique_mask_us_mean = mean_of(mask_us[1]);
  out.unique_plain_check_us_p50 = median(check_us[0]);
  out.unique_check_us_p50 = median(check_us[1]);
}

}  // namespace

JsonRun run_json_workload(const std::string& model, int threads, int repeats) {
  JsonRun out;
  out.model = model;
  // The vocabulary trie, as the engine builds it (control tokens out, end tokens apart).
  const auto file = model::GgufFile::open(model);
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  auto t0 = Clock::now();
  std::vector<std::string> pieces(static_cast<std::size_t>(tok->vocab_size()));
  std::vector<bool> usable(pieces.size(), false);
  for (std::int32_t id = 0; id < tok->vocab_size(); ++id) {
    const auto t = tok->token_type(id);
    if (t != tokenizer::TokenType::normal && t != tokenizer::TokenType::byte &&
        t != tokenizer::TokenType::user_defined && t != tokenizer::TokenType::undefined)
      continue;
    pieces[static_cast<std::size_t>(id)] = tok->token_to_piece(id);
    usable[static_cast<std::size_t>(id)] = true;
  }
  const auto trie = std::make_shared<const grammar::TokenTrie>(pieces, usable, tok->end_of_generation_tokens());
  out.trie_build_ms = ms_since(t0);
  out.vocab = trie->vocab_size();
  out.trie_nodes = trie->node_count();

  EngineOptions o;
  o.threads = threads;
  o.max_sequences = 16;
  o.prefix_cache = false;  // measure compute, not reuse
  Engine engine = Engine::open(model, o);

  // Greedy constrained runs: their tokens feed the mask replay, their lengths the free runs.
  std::vector<int> lengths;
  std::vector<double> mask_us, uncached_us, compile_ms, check_us, free_us;
  std::vector<float> row(static_cast<std::size_t>(trie->vocab_size()));
  for (const Schema& s : kSchemas) {
    const Completion c = engine.generate(request(s, true, 160, 0.0f, 0));
    lengths.push_back(std::max(2, c.generated_tokens));
    t0 = Clock::now();
    auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_schema_to_gbnf(s.json)));
    grammar::TokenConstraint constraint(g, trie);
    compile_ms.push_back(ms_since(t0));
    for (std::int32_t id : c.tokens) {
      std::fill(row.begin(), row.end(), 0.0f);
      const std::size_t before = constraint.masks_computed();
      const auto t = Clock::now();
      constraint.apply(row.data());
      constraint.accept(id);
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t).count();
      mask_us.push_back(us);
      if (constraint.masks_computed() > before) uncached_us.push_back(us);
    }
    // The sampler's usual step: greedy, the model's pick (here: the generated token) on top.
    grammar::TokenConstraint checked(g, trie);
    SamplingParams greedy;
    greedy.temperature = 0;
    runtime::Sampler sampler(greedy, trie->vocab_size()), free_sampler(greedy, trie->vocab_size());
    const std::vector<std::int32_t> no_history;
    for (std::int32_t id : c.tokens) {
      std::fill(row.begin(), row.end(), 0.0f);
      row[static_cast<std::size_t>(id)] = 1.0f;
      const auto t = Clock::now();
      const std::int32_t got = sampler.sample(row.data(), no_history, nullptr, nullptr, &checked);
      checked.accept(got);
      check_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      // The same step without a grammar: what an unconstrained request pays anyway.
      std::fill(row.begin(), row.end(), 0.0f);
      row[static_cast<std::size_t>(id)] = 1.0f;
      const auto t2 = Clock::now();
      free_sampler.sample(row.data(), no_history);
      free_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t2).count());
    }
  }
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
  };
  out.compile_ms_mean = mean(compile_ms);
  out.compile_ms_max = *std::max_element(compile_ms.begin(), compile_ms.end());
  out.mask_us_mean = mean(mask_us);
  out.uncached_mask_us_mean = mean(uncached_us);
  out.mask_steps = static_cast<int>(mask_us.size());
  out.uncached_steps = static_cast<int>(uncached_us.size());
  std::vector<double> sorted = mask_us;
  std::sort(sorted.begin(), sorted.end());
  out.mask_us_p99 = sorted.empty() ? 0 : sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  out.check_us_mean = mean(check_us);
  std::sort(check_us.begin(), check_us.end());
  out.check_us_p99 = check_us.empty() ? 0 : check_us[std::min(check_us.size() - 1, check_us.size() * 99 / 100)];
  out.check_us_p50 = check_us.empty() ? 0 : check_us[check_us.size() / 2];
  std::sort(free_us.begin(), free_us.end());
  out.free_step_us_p50 = free_us.empty() ? 0 : free_us[free_us.size() / 2];
  out.mask_us_p50 = sorted.empty() ? 0 : sorted[sorted.size() / 2];

  // Decode tokens/s: batch 1 (decode time of each request) and 16 streams (wall time).
  std::vector<double> b1_free, b1_schema, b16_free, b16_schema;
  const auto b1 = [&](bool constrained) {
    double tokens = 0, ms = 0;
    for (std::size_t i = 0; i < std::size(kSchemas); ++i) {
      const Completion c = engine.generate(request(kSchemas[i], constrained, lengths[i], 0.0f, 0));
      tokens += c.generated_tokens - 1;
      ms += c.timings.decode_ms;
    }
    return tokens * 1000.0 / ms;
  };
  // Each free stream generates what the constrained stream of the same seed did (seeded sampling
  // is reproducible, so its length is the same every run): both runs then have the same number
  // of sequences in every step, and only the grammar's cost differs. (With the greedy lengths,
  // the sampled constrained streams ended at other times, and the ratio measured the tail.)
  std::vector<int> stream_lengths(16, 160);
  const auto b16 = [&](bool constrained) {
    std::vector<RequestHandle> handles;
    const auto start = Clock::now();
    for (int i = 0; i < 16; ++i) {
      const std::size_t k = static_cast<std::size_t>(i) % std::size(kSchemas);
      handles.push_back(engine.submit(request(kSchemas[k], constrained,
                                              constrained ? 160 : stream_lengths[static_cast<std::size_t>(i)], 0.7f,
                                              static_cast<std::uint64_t>(i))));
    }
    double tokens = 0;
    for (std::size_t i = 0; i < handles.size(); ++i) {
      const int generated = handles[i].wait().generated_tokens;
      if (constrained) stream_lengths[i] = std::max(1, generated);
      tokens += generated;
    }
    return tokens * 1000.0 / ms_since(start);
  };
  measure_unique_items(engine, trie, out);
  b1(true), b1(false), b16(true);  // warm-up; b16(true) sets stream_lengths
  // Pairs run back to back, the order alternating, and each pair gives a ratio: on a shared
  // machine whose load drifts, the median of paired ratios is steadier than a ratio of medians.
  std::vector<double> b1_ratio, b16_ratio;
  for (int r = 0; r < repeats; ++r) {
    const bool schema_first = r % 2 == 0;
    for (bool constrained : {schema_first, !schema_first})
      (constrained ? b1_schema : b1_free).push_back(b1(constrained));
    for (bool constrained : {schema_first, !schema_first})
      (constrained ? b16_schema : b16_free).push_back(b16(constrained));
    b1_ratio.push_back(b1_schema.back() / b1_free.back());
    b16_ratio.push_back(b16_schema.back() / b16_free.back());
  }
  out.ratio_b1 = median(b1_ratio);
  out.ratio_b16 = median(b16_ratio);
  out.tps_b1_free = median(b1_free);
  out.tps_b1_schema = median(b1_schema);
  out.tps_b16_free = median(b16_free);
  out.tps_b16_schema = median(b16_schema);
  return out;
}

}  // namespace ember::bench
