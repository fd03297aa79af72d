// Built against an installed ember (C++17, only the public headers). Without a model path it
// checks that the library links, through its C++ API and its C ABI (a Windows DLL exports both),
// and reports errors as ember::Error and as status codes; with one it generates.
#include <ember/ember.h>
#include <ember/ember.hpp>

#include <cstdio>
#include <cstring>

namespace {

// The C ABI's view of the same failure: a status and a message, no exception.
bool c_abi_reports_missing_file() {
  ember_engine* engine = nullptr;
  const ember_status status = ember_engine_open("/nonexistent/model.gguf", nullptr, &engine);
  std::printf("C ABI: ember %s, open: %s (%s)\n", ember_version(), ember_status_string(status), ember_last_error());
  return status == EMBER_ERROR_IO && engine == nullptr && std::strlen(ember_last_error()) > 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("ember %s\n", ember::version());
  if (argc == 1 && !c_abi_reports_missing_file()) return 1;
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
