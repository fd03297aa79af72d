// The C ABI (include/ember/ember.h): a thin shell over ember::Engine. Every entry point runs
// its body inside guarded(), so no exception crosses into C, and validates handles first.
#include "capi/capi.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>

#define EMBER_CAPI_STR2(x) #x
#define EMBER_CAPI_STR(x) EMBER_CAPI_STR2(x)
static_assert(std::string_view(EMBER_VERSION_STRING) ==
                  EMBER_CAPI_STR(EMBER_VERSION_MAJOR) "." EMBER_CAPI_STR(EMBER_VERSION_MINOR) "." EMBER_CAPI_STR(
                      EMBER_VERSION_PATCH),
              "ember.h's EMBER_VERSION_* must match the project version in CMakeLists.txt");

namespace ember::capi {

ember_status to_status(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return EMBER_ERROR_INVALID_ARGUMENT;
    case ErrorCode::io: return EMBER_ERROR_IO;
    case ErrorCode::invalid_model: return EMBER_ERROR_INVALID_MODEL;
    case ErrorCode::unsupported: return EMBER_ERROR_UNSUPPORTED;
    case ErrorCode::out_of_memory: return EMBER_ERROR_OUT_OF_MEMORY;
    case ErrorCode::context_overflow: return EMBER_ERROR_CONTEXT_OVERFLOW;
    case ErrorCode::cancelled: return EMBER_ERROR_CANCELLED;
    case ErrorCode::internal: return EMBER_ERROR_INTERNAL;
    case ErrorCode::busy: return EMBER_ERROR_BUSY;
  }
  return EMBER_ERROR_INTERNAL;
}

std::string& thread_error() noexcept {
  thread_local std::string message;  // the C convention of errno: per thread, by request
  return message;
}

ember_status record(const ember_engine* engine, ember_status status, const char* message) noexcept {
  try {
    thread_error() = message;
    if (const ember_engine* e = engine_for_errors(engine)) {
      const std::lock_guard<std::mutex> lock(e->error_mutex);
      const_cast<ember_engine*>(e)->last_error = message;
    }
  } catch (...) {
    // Out of memory while copying the message: the status still tells the caller what failed.
  }
  return status;
}

ember_engine& live(ember_engine* engine) {
  if (engine == nullptr) fail(ErrorCode::invalid_argument, "the engine is NULL");
  if (engine->magic != kEngineMagic) {
    fail(ErrorCode::invalid_argument, "the engine handle is not a live engine (closed, or not an ember_engine)");
  }
  return *engine;
}

const ember_engine& live(const ember_engine* engine) { return live(const_cast<ember_engine*>(engine)); }

ember_request& live(ember_request* request) {
  if (request == nullptr) fail(ErrorCode::invalid_argument, "the request is NULL");
  if (request->magic != kRequestMagic) {
    fail(ErrorCode::invalid_argument, "the request handle is not a live request (freed, or not an ember_request)");
  }
  return *request;
}

const ember_request& live(const ember_request* request) { return live(const_cast<ember_request*>(request)); }

namespace {

// Hands a finished request's completion to the caller, who may not want one (NULL output).
void finish(Completion&& result, ember_completion** completion) {
  if (completion != nullptr) *completion = new_completion(std::move(result));
}

}  // namespace
}  // namespace ember::capi

using namespace ember::capi;
using ember::ErrorCode;
using ember::fail;

extern "C" {

EMBER_API const char* ember_version(void) { return ember::version(); }

EMBER_API int ember_version_number(void) { return EMBER_VERSION_NUMBER; }

EMBER_API const char* ember_status_string(ember_status status) {
  switch (raw_enum(status)) {
    case EMBER_OK: return "ok";
    case EMBER_ERROR_BUFFER_TOO_SMALL: return "buffer_too_small";
    case EMBER_ERROR_INVALID_ARGUMENT: return ember::to_string(ErrorCode::invalid_argument);
    case EMBER_ERROR_IO: return ember::to_string(ErrorCode::io);
    case EMBER_ERROR_INVALID_MODEL: return ember::to_string(ErrorCode::invalid_model);
    case EMBER_ERROR_UNSUPPORTED: return ember::to_string(ErrorCode::unsupported);
    case EMBER_ERROR_OUT_OF_MEMORY: return ember::to_string(ErrorCode::out_of_memory);
    case EMBER_ERROR_CONTEXT_OVERFLOW: return ember::to_string(ErrorCode::context_overflow);
    case EMBER_ERROR_CANCELLED: return ember::to_string(ErrorCode::cancelled);
    case EMBER_ERROR_INTERNAL: return ember::to_string(ErrorCode::internal);
    case EMBER_ERROR_BUSY: return ember::to_string(ErrorCode::busy);
  }
  return "unknown";
}

EMBER_API const char* ember_finish_reason_string(ember_finish_reason reason) {
  switch (raw_enum(reason)) {
    case EMBER_FINISH_STOP:
    case EMBER_FINISH_LENGTH:
    case EMBER_FINISH_CONTEXT:
    case EMBER_FINISH_CANCELLED:
    case EMBER_FINISH_ERROR: return ember::to_string(static_cast<ember::FinishReason>(reason));
  }
  return "unknown";
}

EMBER_API const char* ember_load_phase_string(ember_load_phase phase) {
  const long long raw = raw_enum(phase);
  if (raw < EMBER_LOAD_READING || raw > EMBER_LOAD_CACHE) return "unknown";
  return ember::to_string(static_cast<ember::LoadPhase>(raw));
}

EMBER_API const char* ember_last_error(void) { return thread_error().c_str(); }

EMBER_API const char* ember_engine_last_error(const ember_engine* engine) {
  const ember_engine* e = engine_for_errors(engine);
  if (e == nullptr) {
    return engine == nullptr ? "the engine is NULL" : "the engine handle is not a live engine";
  }
  // Copied to this thread's buffer under the lock: another thread may fail on the engine now.
  thread_local std::string copy;
  try {
    const std::lock_guard<std::mutex> lock(e->error_mutex);
    copy = e->last_error;
  } catch (...) {
    return "out of memory reading the engine's last error";
  }
  return copy.c_str();
}

// ---- engine ----

EMBER_API ember_status ember_engine_open(const char* path, const ember_engine_options* options, ember_engine** engine) {
  return guarded(nullptr, [&] {
    require(engine, "the engine output");
    *engine = nullptr;
    require(path, "path");
    const ember::EngineOptions cpp = options != nullptr ? to_cpp(*options) : ember::EngineOptions{};
    auto handle = std::make_unique<ember_engine>(ember::Engine::open(path, cpp));
    const ember::ModelInfo info = handle->engine.info();
    handle->model_name = info.name;
    handle->model_architecture = info.architecture;
    handle->weight_format = info.weight_format;
    handle->magic = kEngineMagic;
    *engine = handle.release();
  });
}

EMBER_API void ember_engine_close(ember_engine** engine) {
  if (engine == nullptr || *engine == nullptr) return;
  ember_engine* e = *engine;
  *engine = nullptr;
  const ember_status status = guarded(nullptr, [&] {
    live(e).magic = kDeadMagic;
    delete e;  // ~Engine finishes unfinished requests as cancelled; it does not throw
  });
  (void)status;  // a stale handle is reported through ember_last_error() only
}

EMBER_API ember_status ember_generate(ember_engine* engine, const char* prompt, const ember_sampling* sampling,
                                      ember_stream_fn on_chunk, void* user_data, ember_completion** completion) {
  return guarded(engine, [&] {
    if (completion != nullptr) *completion = nullptr;
    ember_engine& e = live(engine);
    require(prompt, "prompt");
    ember::Request request;
    request.prompt = prompt;
    request.sampling = to_cpp(sampling);
    finish(e.engine.generate(request, to_cpp(on_chunk, user_data)), completion);
  });
}

EMBER_API ember_status ember_chat(ember_engine* engine, const ember_message* messages, size_t message_count,
                                  const ember_sampling* sampling, ember_stream_fn on_chunk, void* user_data,
                                  ember_completion** completion) {
  return guarded(engine, [&] {
    if (completion != nullptr) *completion = nullptr;
    ember_engine& e = live(engine);
    finish(e.engine.chat(to_cpp(messages, message_count), to_cpp(sampling), to_cpp(on_chunk, user_data)), completion);
  });
}

EMBER_API ember_status ember_submit(ember_engine* engine, const ember_request_params* params, ember_stream_fn on_chunk,
                                    void* user_data, ember_request** request) {
  return guarded(engine, [&] {
    require(request, "the request output");
    *request = nullptr;
    ember_engine& e = live(engine);
    require(params, "params");
    auto handle = std::make_unique<ember_request>();
    handle->handle = e.engine.submit(to_cpp(*params), to_cpp(on_chunk, user_data));
    handle->magic = kRequestMagic;
    *request = handle.release();
  });
}

EMBER_API ember_status ember_engine_step(ember_engine* engine, int64_t budget_us, ember_step_result* result) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    if (budget_us < 0) fail(ErrorCode::invalid_argument, "budget_us must be >= 0, got {}", budget_us);
    if (result != nullptr) check_step_result(*result);
    const ember::StepResult r = e.engine.step(std::chrono::microseconds(budget_us));
    if (result != nullptr) write_step(result, r);
  });
}

EMBER_API ember_status ember_engine_stats(const ember_engine* engine, ember_stats* stats) {
  return guarded(engine, [&] {
    const ember_engine& e = live(engine);
    require(stats, "stats");
    write_stats(stats, e.engine.stats());
  });
}

EMBER_API ember_status ember_engine_info(const ember_engine* engine, ember_model_info* info) {
  return guarded(engine, [&] {
    const ember_engine& e = live(engine);
    require(info, "info");
    write_info(info, e, e.engine.info());
  });
}

// Buffer sizes are not an ember::ErrorCode: the body leaves a message in `too_small` and the
// status is set here, after guarded().
EMBER_API ember_status ember_tokenize(const ember_engine* engine, const char* text, size_t text_length,
                                      int parse_special, int32_t* tokens, size_t capacity, size_t* token_count) {
  std::string too_small;
  const ember_status status = guarded(engine, [&] {
    const ember_engine& e = live(engine);
    require(token_count, "token_count");
    if (text == nullptr && text_length > 0) {
      fail(ErrorCode::invalid_argument, "text is NULL but text_length is {}", text_length);
    }
    const std::string_view view(text == nullptr ? "" : text, text_length);
    const std::vector<std::int32_t> ids = e.engine.tokenize(view, parse_special != 0);
    *token_count = ids.size();
    if (tokens == nullptr || capacity < ids.size()) {
      too_small =
          fmt::format("the token buffer holds {} ids, {} are needed", tokens == nullptr ? 0 : capacity, ids.size());
      return;
    }
    std::copy(ids.begin(), ids.end(), tokens);
  });
  if (status != EMBER_OK || too_small.empty()) return status;
  return record(engine, EMBER_ERROR_BUFFER_TOO_SMALL, too_small.c_str());
}

EMBER_API ember_status ember_detokenize(const ember_engine* engine, const int32_t* tokens, size_t token_count,
                                        char* text, size_t capacity, size_t* text_length) {
  std::string too_small;
  const ember_status status = guarded(engine, [&] {
    const ember_engine& e = live(engine);
    require(text_length, "text_length");
    if (tokens == nullptr && token_count > 0) {
      fail(ErrorCode::invalid_argument, "tokens is NULL but token_count is {}", token_count);
    }
    const std::string out = e.engine.detokenize(std::vector<std::int32_t>(tokens, tokens + token_count));
    *text_length = out.size();
    if (text == nullptr || capacity <= out.size()) {
      too_small = fmt::format("the text buffer holds {} bytes, {} are needed (with the NUL)",
                              text == nullptr ? 0 : capacity, out.size() + 1);
      return;
    }
    std::copy(out.begin(), out.end(), text);
    text[out.size()] = '\0';
  });
  if (status != EMBER_OK || too_small.empty()) return status;
  return record(engine, EMBER_ERROR_BUFFER_TOO_SMALL, too_small.c_str());
}

// ---- requests and completions ----

EMBER_API ember_status ember_request_wait(ember_request* request, ember_completion** completion) {
  return guarded(nullptr, [&] {
    require(completion, "the completion output");
    *completion = nullptr;
    *completion = new_completion(live(request).handle.wait());
  });
}

EMBER_API ember_status ember_request_cancel(ember_request* request) {
  return guarded(nullptr, [&] { live(request).handle.cancel(); });
}

EMBER_API ember_status ember_request_cancel_soon(ember_request* request) {
  return guarded(nullptr, [&] { live(request).handle.cancel_soon(); });
}

EMBER_API ember_status ember_request_status(const ember_request* request, ember_request_state* state) {
  return guarded(nullptr, [&] {
    const ember_request& r = live(request);
    require(state, "state");
    *state = static_cast<ember_request_state>(r.handle.status());
  });
}

EMBER_API ember_status ember_request_id(const ember_request* request, uint64_t* id) {
  return guarded(nullptr, [&] {
    const ember_request& r = live(request);
    require(id, "id");
    *id = r.handle.id();
  });
}

EMBER_API void ember_request_free(ember_request** request) {
  if (request == nullptr || *request == nullptr) return;
  ember_request* r = *request;
  *request = nullptr;
  (void)guarded(nullptr, [&] {
    live(r).magic = kDeadMagic;
    delete r;
  });
}

EMBER_API void ember_completion_free(ember_completion** completion) {
  if (completion == nullptr || *completion == nullptr) return;
  auto* box = reinterpret_cast<CompletionBox*>(*completion);
  *completion = nullptr;
  (void)guarded(nullptr, [&] {
    if (box->magic == kBorrowedMagic) {
      fail(ErrorCode::invalid_argument, "a chunk's completion belongs to ember; it cannot be freed");
    }
    if (box->magic != kCompletionMagic) {
      fail(ErrorCode::invalid_argument, "the completion is not a live ember_completion (freed twice?)");
    }
    box->magic = kDeadMagic;
    delete box->owned;
    delete box;
  });
}

}  // extern "C"
