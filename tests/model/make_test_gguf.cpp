// Writes a tiny synthetic model and a copy with a broken magic for the ember-inspect tests.
#include "model_writer/gguf_writer.hpp"

#include <cstdio>
#include <exception>
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_test_gguf GOOD.gguf BAD.gguf\n");
    return 2;
  }
  try {
    auto image = ember::model::make_synthetic_model(ember::model::SyntheticModelSpec{});
    std::ofstream(argv[1], std::ios::binary)
        .write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
    image[3] = 'X';
    std::ofstream(argv[2], std::ios::binary)
        .write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
