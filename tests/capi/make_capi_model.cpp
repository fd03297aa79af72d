// Writes the synthetic model that the C ABI tests and the c_api example run on (a ctest
// fixture): the C tests cannot call the C++ GGUF writer themselves.
#include "model_writer/gguf_writer.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_capi_model OUT.gguf\n");
    return 2;
  }
  try {
    ember::model::SyntheticModelSpec spec;
    spec.config = ember::model::SyntheticModelSpec::tiny_config();
    spec.config.context_length = 256;
    spec.seed = 42;
    ember::model::write_synthetic_model(spec, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_capi_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
