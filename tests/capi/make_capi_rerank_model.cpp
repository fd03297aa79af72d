// Writes the synthetic BERT reranker (what `ember-make-synthetic bert-rerank` writes) that
// test_capi_rerank runs on: a ctest fixture, as the C test cannot call the C++ writer.
#include "model_writer/synthetic_bert.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_capi_rerank_model OUT.gguf\n");
    return 2;
  }
  try {
    ember::model::SyntheticBertSpec spec;
    spec.name = "ember-synthetic-bert-rerank";
    ember::model::write_synthetic_bert(spec, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_capi_rerank_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
