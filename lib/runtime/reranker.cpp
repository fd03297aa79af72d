// Engine::rerank: each (query, document) pair tokenized as one sequence (Tokenizer::encode_pair,
// llama-server's format_prompt_rerank) and run through EngineCore::embed with rank pooling, so
// the pairs are batched like texts and the classification head scores each one
// (model/classifier_head.hpp). Kept apart from engine.cpp: a concern of its own.
#include "runtime/engine_core.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

namespace ember {

std::vector<float> Engine::rerank(std::string_view query, const std::vector<std::string>& documents,
                                  std::vector<int>* pair_tokens) {
  runtime::EngineCore& engine = core("rerank");
  if (pair_tokens != nullptr) pair_tokens->clear();
  if (documents.empty()) return {};
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  std::vector<std::vector<std::int32_t>> pairs;
  pairs.reserve(documents.size());
  const auto limit = static_cast<std::size_t>(engine.embed_limit());
  for (std::size_t i = 0; i < documents.size(); ++i) {
    pairs.push_back(tok.encode_pair(query, documents[i]));
    if (pairs.back().size() > limit)
      fail(ErrorCode::context_overflow, "rerank: the query and document {} are {} tokens, over the {} the model reads",
           i, pairs.back().size(), limit);
  }
  EmbedOptions options;
  options.pooling = Pooling::rank;
  const std::vector<Embedding> scored = engine.embed(pairs, options);
  std::vector<float> scores;
  scores.reserve(scored.size());
  for (const Embedding& e : scored) scores.push_back(e.values.at(0));
  if (pair_tokens != nullptr)
    for (const Embedding& e : scored) pair_tokens->push_back(e.tokens);
  return scores;
}

}  // namespace ember
