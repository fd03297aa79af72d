// Engine::rerank on a synthetic BERT cross-encoder with a classification head
// (model_writer/synthetic_bert.hpp, what `ember-make-synthetic bert-rerank` writes) against
// llama.cpp's rank pooling on the same file: tests/data/reference/bert_rerank_scores.json
// (tests/reference/make_embed_goldens.py --rerank) holds llama.cpp's pair tokens and scores.
// The measured differences: docs/benchmarks.md#rerank.
#include "test_support.hpp"

#include "model/gguf.hpp"
#include "model_writer/gguf_writer.hpp"
#include "model_writer/synthetic_bert.hpp"
#include "tokenizer/tokenizer.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace ember;

namespace {

struct Pair {
  std::string document;
  std::vector<std::int32_t> tokens;
  std::vector<float> scores;
};
struct Case {
  std::string query;
  std::vector<Pair> pairs;
};

const std::vector<Case>& golden() {
  static const std::vector<Case> g = [] {
    std::ifstream in(test::data_path("reference/bert_rerank_scores.json"));
    REQUIRE_MESSAGE(in.good(), "cannot read tests/data/reference/bert_rerank_scores.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    std::vector<Case> out;
    for (const auto& c : j.at("cases")) {
      Case k{c.at("query").get<std::string>(), {}};
      for (const auto& p : c.at("pairs"))
        k.pairs.push_back({p.at("document").get<std::string>(), p.at("tokens").get<std::vector<std::int32_t>>(),
                           p.at("scores").get<std::vector<float>>()});
      out.push_back(std::move(k));
    }
    return out;
  }();
  return g;
}

// The file the golden was made from (ember-make-synthetic bert-rerank), or its headless twin.
std::string bert_file(bool classifier) {
  model::SyntheticBertSpec spec;
  spec.classifier = classifier;
  spec.name = classifier ? "ember-synthetic-bert-rerank" : "ember-synthetic-bert";
  const std::string path = (test::temp_dir("ember-bert") / (spec.name + ".gguf")).string();
  model::write_synthetic_bert(spec, path);
  return path;
}

Engine open(const std::string& path, Precision precision) {
  EngineOptions o;
  o.precision = precision;
  o.threads = test::compute_threads(2);
  return Engine::open(path, o);
}

std::vector<std::string> documents(const Case& c) {
  std::vector<std::string> docs;
  for (const Pair& p : c.pairs) docs.push_back(p.document);
  return docs;
}

// The largest |ember - llama.cpp| over every golden pair.
double worst_difference(Engine& engine) {
  double worst = 0.0;
  for (const Case& c : golden()) {
    const std::vector<float> scores = engine.rerank(c.query, documents(c));
    REQUIRE(scores.size() == c.pairs.size());
    for (std::size_t i = 0; i < scores.size(); ++i)
      worst = std::max(worst, std::abs(double(scores[i]) - c.pairs[i].scores.at(0)));
  }
  return worst;
}

}  // namespace

TEST_CASE("a rerank pair's tokens are llama-server's: [CLS] query [SEP] document [SEP]") {
  const auto file = model::GgufFile::open(bert_file(true));
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  std::size_t pairs = 0;
  for (const Case& c : golden())
    for (const Pair& p : c.pairs) {
      CHECK_MESSAGE(tok->encode_pair(c.query, p.document) == p.tokens, c.query, " / ", p.document);
      ++pairs;
    }
  CHECK(pairs == 15);
}

TEST_CASE("rerank scores equal llama.cpp's rank pooling within 1e-4 (fp32)") {
  Engine engine = open(bert_file(true), Precision::fp32);
  const ModelInfo info = engine.info();
  CHECK(info.pooling == "rank");
  CHECK(info.classifier_outputs == 1);
  const double worst = worst_difference(engine);
  MESSAGE("fp32 worst |score - llama.cpp| ", worst);
  CHECK(worst <= 1e-4);
}

TEST_CASE("rerank in INT8 stays near llama.cpp's scores and keeps the best document first") {
  Engine engine = open(bert_file(true), Precision::int8);
  const double worst = worst_difference(engine);
  MESSAGE("int8 worst |score - llama.cpp| ", worst);
  CHECK(worst <= 0.005);
  for (const Case& c : golden()) {
    const std::vector<float> scores = engine.rerank(c.query, documents(c));
    std::size_t ours = 0, theirs = 0;
    for (std::size_t i = 1; i < scores.size(); ++i) {
      if (scores[i] > scores[ours]) ours = i;
      if (c.pairs[i].scores[0] > c.pairs[theirs].scores[0]) theirs = i;
    }
    CHECK_MESSAGE(ours == theirs, c.query);
  }
}

TEST_CASE("a pair's score does not depend on the batch it is scored in, and equals Pooling::rank") {
  Engine engine = open(bert_file(true), Precision::int8);
  const Case& c = golden().at(0);
  const std::vector<float> together = engine.rerank(c.query, documents(c));
  for (std::size_t i = 0; i < c.pairs.size(); ++i)
    CHECK(engine.rerank(c.query, {c.pairs[i].document}).at(0) == together[i]);
  EmbedOptions rank;
  rank.pooling = Pooling::rank;
  const std::vector<Embedding> raw = engine.embed_tokens({c.pairs[0].tokens}, rank);
  REQUIRE(raw.at(0).values.size() == 1);
  CHECK(raw[0].values[0] == together[0]);
  // The model's default pooling is rank: embed() gives the head's scores, not normalised.
  CHECK(engine.embed_tokens({c.pairs[0].tokens}).at(0).values == raw[0].values);
  CHECK(engine.rerank(c.query, {}).empty());
}

TEST_CASE("rank pooling is the head over the first token's hidden state; a head of two outputs") {
  model::SyntheticBertSpec spec;
  spec.classifier_outputs = 2;
  spec.name = "ember-synthetic-bert-two-labels";
  const std::string path = (test::temp_dir("ember-bert") / "two-labels.gguf").string();
  model::write_synthetic_bert(spec, path);
  Engine engine = open(path, Precision::fp32);
  CHECK(engine.info().classifier_outputs == 2);
  const std::vector<std::int32_t>& tokens = golden().at(0).pairs.at(0).tokens;
  EmbedOptions cls;
  cls.pooling = Pooling::cls;
  cls.normalize = false;
  const std::vector<float> h = engine.embed_tokens({tokens}, cls).at(0).values;
  EmbedOptions rank;
  rank.pooling = Pooling::rank;
  const std::vector<float> scores = engine.embed_tokens({tokens}, rank).at(0).values;
  REQUIRE(scores.size() == 2);
  // The head by hand from the file's tensors: cls.output (tanh(cls h + cls.bias)) + cls.output.bias.
  const auto file = model::GgufFile::open(path);
  const auto values = [&](const char* name) {
    const model::GgufTensor& t = file->tensor(name);
    const auto* f = reinterpret_cast<const float*>(t.data);  // F32 in the synthetic file
    return std::vector<float>(f, f + t.numel());
  };
  const std::vector<float> w = values("cls.weight"), b = values("cls.bias");
  const std::vector<float> wo = values("cls.output.weight"), bo = values("cls.output.bias");
  const std::size_t d = h.size();
  std::vector<double> dense(d);
  for (std::size_t r = 0; r < d; ++r) {
    double sum = b[r];
    for (std::size_t i = 0; i < d; ++i) sum += double(w[r * d + i]) * h[i];
    dense[r] = std::tanh(sum);
  }
  for (std::size_t o = 0; o < 2; ++o) {
    double sum = bo[o];
    for (std::size_t i = 0; i < d; ++i) sum += double(wo[o * d + i]) * dense[i];
    CHECK(scores[o] == doctest::Approx(sum).epsilon(1e-6));
  }
  CHECK(engine.rerank(golden().at(0).query, {golden().at(0).pairs.at(0).document}).at(0) == scores[0]);
}

TEST_CASE("rerank refuses a model without a classification head, a decoder, and a pair too long") {
  Engine headless = open(bert_file(false), Precision::fp32);
  CHECK(headless.info().classifier_outputs == 0);
  CHECK(headless.info().pooling == "mean");
  try {
    headless.rerank("where is the dragon?", {"the dragon"});
    FAIL("rerank ran without a head");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(std::string(e.what()).find("classification head") != std::string::npos);
  }
  Engine decoder = Engine::open(test::synthetic_model_file(1));
  try {
    decoder.rerank("where", {"here"});
    FAIL("rerank ran on a decoder");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
  }
  Engine reranker = open(bert_file(true), Precision::fp32);
  std::string long_document;
  for (int i = 0; i < 200; ++i) long_document += "dragon ";
  try {
    reranker.rerank("where is the dragon?", {"short", long_document});
    FAIL("a pair over the context ran");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::context_overflow);
  }
}
