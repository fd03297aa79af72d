// The C ABI's embeddings (ember.h, "embeddings"): thin shells over Engine::embed and
// Engine::rerank, inside guarded() like every entry. Kept apart from ember_c.cpp: a separate
// concern of the ABI.
#include "capi/capi.hpp"

#include <algorithm>
#include <cstdlib>

using namespace ember::capi;
using ember::ErrorCode;
using ember::fail;

namespace {

ember::Pooling to_pooling(std::int32_t pooling) {
  switch (pooling) {
    case EMBER_POOLING_MODEL_DEFAULT: return ember::Pooling::model_default;
    case EMBER_POOLING_NONE: return ember::Pooling::none;
    case EMBER_POOLING_MEAN: return ember::Pooling::mean;
    case EMBER_POOLING_CLS: return ember::Pooling::cls;
    case EMBER_POOLING_LAST: return ember::Pooling::last;
    case EMBER_POOLING_RANK: return ember::Pooling::rank;
    default: fail(ErrorCode::invalid_argument, "pooling {} is not an ember_pooling value", pooling);
  }
}

}  // namespace

extern "C" {

EMBER_API ember_status ember_embed(ember_engine* engine, const char* const* texts, size_t text_count, int32_t pooling,
                                   uint32_t flags, float** embeddings, size_t* dimension, int32_t* token_counts) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(embeddings, "the embeddings output");
    require(dimension, "the dimension output");
    if (texts == nullptr && text_count > 0)
      fail(ErrorCode::invalid_argument, "texts is NULL but text_count is {}", text_count);
    if (flags & ~(EMBER_EMBED_NO_NORMALIZE | EMBER_EMBED_NO_TRUNCATE | EMBER_EMBED_NO_SPECIAL))
      fail(ErrorCode::invalid_argument, "unknown ember_embed flags {:#x}", flags);
    ember::EmbedOptions options;
    options.pooling = to_pooling(pooling);
    options.normalize = (flags & EMBER_EMBED_NO_NORMALIZE) == 0;
    options.truncate = (flags & EMBER_EMBED_NO_TRUNCATE) == 0;
    options.add_special = (flags & EMBER_EMBED_NO_SPECIAL) == 0;
    const ember::ModelInfo info = e.engine.info();
    // A file whose own pooling_type is none gives rows per token under MODEL_DEFAULT too.
    const bool per_token = options.pooling == ember::Pooling::none ||
                           (options.pooling == ember::Pooling::model_default && info.pooling == "none");
    if (per_token && token_counts == nullptr)
      fail(ErrorCode::invalid_argument,
           "pooling {} gives a row per token (EMBER_POOLING_NONE{}): token_counts must say where each text's rows "
           "end",
           pooling, options.pooling == ember::Pooling::none ? "" : ", the file's pooling_type");
    std::vector<std::string> list;
    list.reserve(text_count);
    for (size_t i = 0; i < text_count; ++i) {
      if (texts[i] == nullptr) fail(ErrorCode::invalid_argument, "texts[{}] is NULL", i);
      list.emplace_back(texts[i]);
    }
    const std::vector<ember::Embedding> result = e.engine.embed(list, options);
    std::size_t total = 0;
    for (const ember::Embedding& v : result) total += v.values.size();
    // malloc, not new[]: the buffer is the caller's until ember_embeddings_free, a plain C object.
    auto* out = static_cast<float*>(std::malloc(std::max<std::size_t>(total, 1) * sizeof(float)));
    if (out == nullptr) fail(ErrorCode::out_of_memory, "cannot allocate {} floats for the embeddings", total);
    float* at = out;
    for (std::size_t i = 0; i < result.size(); ++i) {
      at = std::copy(result[i].values.begin(), result[i].values.end(), at);
      if (token_counts != nullptr) token_counts[i] = result[i].tokens;
    }
    *embeddings = out;
    const bool rank = options.pooling == ember::Pooling::rank ||
                      (options.pooling == ember::Pooling::model_default && info.pooling == "rank");
    *dimension = static_cast<size_t>(rank ? info.classifier_outputs : info.embedding);
  });
}

EMBER_API ember_status ember_rerank(ember_engine* engine, const char* query, const char* const* documents,
                                    size_t document_count, float* scores) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(query, "the query");
    if (document_count > 0) {
      require(documents, "the documents");
      require(scores, "the scores output");
    }
    std::vector<std::string> list;
    list.reserve(document_count);
    for (size_t i = 0; i < document_count; ++i) {
      if (documents[i] == nullptr) fail(ErrorCode::invalid_argument, "documents[{}] is NULL", i);
      list.emplace_back(documents[i]);
    }
    const std::vector<float> result = e.engine.rerank(query, list);
    std::copy(result.begin(), result.end(), scores);
  });
}

EMBER_API void ember_embeddings_free(float** embeddings) {
  if (embeddings == nullptr) return;
  std::free(*embeddings);
  *embeddings = nullptr;
}

}  // extern "C"
