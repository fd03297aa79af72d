#include "speculation_workload.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace ember::bench {
namespace {

RateStats rate_stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

double decode_rate(const Completion& c) {
  return c.timings.decode_ms > 0 ? (c.generated_tokens - 1) / (c.timings.decode_ms / 1000.0) : 0.0;
}

// The passage to copy: plain prose with names and numbers, about 400 tokens in BPE
// vocabularies of 32-50k entries.
constexpr const char* kPassage =
    "The harbour of Kesselmouth was built in 1841 by the engineer Aldous Marrow, who had spent "
    "twelve years surveying the northern coast for the Admiralty. Its two stone piers enclose a "
    "basin of about nine acres, deep enough at low water for the herring boats that once crowded "
    "it every autumn. A lighthouse of grey granite stands at the end of the eastern pier; its lamp "
    "was first lit on the evening of the fourteenth of October, and the keeper's log records that "
    "the wind was from the south-west and the sea calm. For most of the nineteenth century the "
    "town lived on fish, salt and timber. Ships came in from Norway with pine planks and left with "
    "barrels of cured herring bound for the Baltic ports. The customs house, a square building "
    "with a clock above its door, still stands on the quay, although it has been a museum since "
    "1962. Inside are the ledgers of the harbour master, written in a careful hand, listing every "
    "vessel that entered the basin: its name, its master, its cargo and the depth of water it "
    "drew. In the winter of 1881 a great storm broke the end of the western pier and sank four "
    "boats at their moorings. The town raised the money to rebuild it within two years, and a "
    "plaque on the new stones names the three hundred and six families who gave to the fund. The "
    "railway reached Kesselmouth in 1889, and with it came the first visitors from the inland "
    "cities, who walked on the piers, bathed from the sands below the cliffs and bought painted "
    "shells from the children on the quay. By 1900 there were six hotels along the front, and the "
    "old net lofts had become tea rooms. The herring left the coast in the 1930s, and the last "
    "fishing boat was sold in 1951. Today the basin holds yachts, the lighthouse is worked "
    "automatically from a station forty miles away, and the keeper's cottage is let to walkers "
    "who come for the cliffs and the seabirds.";

Request edit_request() {
  Request r;
  r.messages = {{"system", "You are a careful copy editor."},
                {"user", std::string("Repeat the following passage exactly as it is, word for word, except that you "
                                     "write \"port\" instead of \"harbour\" and \"Kesselhaven\" instead of "
                                     "\"Kesselmouth\". Reply with the passage only.\n\n") +
                             kPassage}};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 480;  // the passage is ~420 tokens of output
  return r;
}

// Text the model writes itself: little of it repeats earlier text (the lookup's worst case).
Request story_request() {
  Request r;
  r.messages = {{"user", "Write a short story about a lighthouse keeper who finds a message in a bottle."}};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 128;
  return r;
}

Request tg128_request(const Engine& engine) {
  Request r;
  r.prompt_tokens = synthetic_prompt(engine, 16, 2);
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = 128;
  return r;
}

}  // namespace

std::vector<std::int32_t> synthetic_prompt(const Engine& engine, int n, int salt) {
  std::string text;
  std::vector<std::int32_t> tokens;
  for (int i = 0; static_cast<int>(tokens.size()) < n; ++i) {
    text += "Paragraph " + std::to_string(salt * 1000 + i) +
            ": the keeper wrote down the ships, the weather and the birds that struck the glass. ";
    tokens = engine.tokenize(text);
  }
  tokens.resize(static_cast<std::size_t>(n));
  return tokens;
}

std::vector<SpeculationRow> run_edit_workload(const std::string& model, int threads, int repeats,
                                              int speculative_tokens) {
  EngineOptions options;
  options.threads = threads;
  Engine engine = Engine::open(model, options);
  const std::pair<std::string, Request> requests[] = {
      {"edit", edit_request()}, {"tg128", tg128_request(engine)}, {"story", story_request()}};
  std::vector<SpeculationRow> rows;
  std::map<std::pair<std::string, int>, std::vector<double>> rates;
  std::map<std::string, std::vector<std::int32_t>> unspeculated;
  for (const auto& [name, request] : requests)
    for (int k : {0, speculative_tokens}) {
      SpeculationRow row;
      row.request = name;
      row.speculative_tokens = k;
      rows.push_back(row);
    }
  // Interleaved: each repeat runs every (request, setting) once; repeat -1 is the warm-up (it
  // also fills the prefix cache with the prompts, so the runs time the decodes alike).
  for (int r = -1; r < repeats; ++r)
    for (SpeculationRow& row : rows) {
      Request request = std::find_if(std::begin(requests), std::end(requests), [&](const auto& q) {
                          return q.first == row.request;
                        })->second;
      request.sampling.speculative_tokens = row.speculative_tokens;
      const Completion c = engine.generate(request);
      if (row.speculative_tokens == 0) unspeculated[row.request] = c.tokens;
      row.same_tokens = row.same_tokens && c.tokens == unspeculated[row.request];
      row.generated = c.generated_tokens;
      row.proposed = c.speculative_proposed;
      row.accepted = c.speculative_accepted;
      if (r >= 0) rates[{row.request, row.speculative_tokens}].push_back(decode_rate(c));
    }
  for (SpeculationRow& row : rows) row.decode_tokens_per_s = rate_stats(rates[{row.request, row.speculative_tokens}]);
  return rows;
}

std::vector<LongContextRow> run_long_context(const std::string& model, int threads, int repeats, int prompt_tokens) {
  const std::size_t kv_bytes = std::size_t{512} << 20;
  std::vector<std::pair<LongContextRow, Engine>> engines;
  for (KvCacheType type : {KvCacheType::f16, KvCacheType::int8}) {
    EngineOptions options;
    options.threads = threads;
    options.kv_cache_type = type;
    options.kv_cache_bytes = kv_bytes;
    options.context_length = prompt_tokens + 256;
    options.max_batch_tokens = 512;
    Engine engine = Engine::open(model, options);
    LongContextRow row;
    row.kv_type = type;
    row.kv_cache_bytes = kv_bytes;
    row.pool_tokens = engine.stats().kv_blocks_total * options.kv_block_size;
    engines.emplace_back(row, std::move(engine));
  }
  std::vector<std::vector<double>> rates(engines.size());
  for (int r = -1; r < repeats; ++r)  // -1: the prefill, then a warm-up decode
    for (std::size_t e = 0; e < engines.size(); ++e) {
      Engine& engine = engines[e].second;
      Request request;
      request.prompt_tokens = synthetic_prompt(engine, prompt_tokens, 3);
      request.sampling.temperature = 0;
      request.sampling.ignore_eos = true;
      request.sampling.max_tokens = 128;
      const Completion c = engine.generate(request);
      if (r >= 0) rates[e].push_back(decode_rate(c));
    }
  std::vector<LongContextRow> rows;
  for (std::size_t e = 0; e < engines.size(); ++e) {
    engines[e].first.decode_tokens_per_s = rate_stats(rates[e]);
    rows.push_back(engines[e].first);
  }
  return rows;
}

// The longctx workload: run_long_context printed as a table, and as ember-bench's JSON rows.
nlohmann::json long_context_report(const std::string& model, int threads, int repeats) {
  constexpr int kPromptTokens = 4096;
  const auto rows = run_long_context(model, threads, repeats, kPromptTokens);
  std::printf("longctx: tg128 after a %d-token prompt (int8 weights, %d threads, %d repeats)\n", kPromptTokens, threads,
              repeats);
  std::printf("%-6s %10s %10s %10s %8s %14s\n", "kv", "median", "min", "max", "vs f16", "pool tokens");
  nlohmann::json out = nlohmann::json::array();
  const double f16 = rows.front().decode_tokens_per_s.median;
  for (const auto& r : rows) {
    const char* kv = r.kv_type == ember::KvCacheType::int8 ? "int8" : "f16";
    std::printf("%-6s %10.2f %10.2f %10.2f %7.2fx %14d (%zu MiB)\n", kv, r.decode_tokens_per_s.median,
                r.decode_tokens_per_s.min, r.decode_tokens_per_s.max, r.decode_tokens_per_s.median / f16, r.pool_tokens,
                r.kv_cache_bytes >> 20);
    out.push_back({{"engine", "ember"},
                   {"workload", "longctx"},
                   {"kv_type", kv},
                   {"threads", threads},
                   {"prompt_tokens", kPromptTokens},
                   {"decode_tokens_per_s",
                    {{"median", r.decode_tokens_per_s.median},
                     {"min", r.decode_tokens_per_s.min},
                     {"max", r.decode_tokens_per_s.max}}},
                   {"pool_tokens", r.pool_tokens},
                   {"kv_cache_bytes", r.kv_cache_bytes}});
  }
  return out;
}

}  // namespace ember::bench
