// Writes the synthetic model the example tests run on: the tiny Llama shape with a context long
// enough for ember-npc's world lore (the byte-level test vocabulary needs ~1 token per 2-3
// characters), and the SmolLM2 ChatML template.
//
//   make_example_model OUTPUT.gguf
#include "model_writer/gguf_writer.hpp"

#include <ember/ember.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_example_model OUTPUT.gguf\n");
    return 2;
  }
  try {
    ember::model::SyntheticModelSpec spec;
    spec.config = ember::model::SyntheticModelSpec::tiny_config();
    spec.config.context_length = 4096;
    spec.seed = 7;
    ember::model::write_synthetic_model(spec, argv[1]);
    std::printf("wrote %s\n", argv[1]);
    return 0;
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
