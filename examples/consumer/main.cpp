// Built against an installed ember (C++17, only <ember/ember.hpp>). Without a model path it
// checks that the library links and reports errors as ember::Error; with one it generates.
#include <ember/ember.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  std::printf("ember %s\n", ember::version());
  try {
    ember::Engine::open(argc > 1 ? argv[1] : "/nonexistent/model.gguf");
  } catch (const ember::Error& e) {
    if (argc > 1) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
    std::printf("expected error (%s): %s\n", ember::to_string(e.code()), e.what());
    return e.code() == ember::ErrorCode::io ? 0 : 1;
  }
  return argc > 1 ? 0 : 1;
}
