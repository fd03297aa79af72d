// The OpenAI wire format going out: response bodies, stream chunks and the stream mapper that
// turns ember's chunks into them (tool calls parsed as they arrive). Requests coming in are
// openai_api.cpp's.
#include "openai_api.hpp"

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace server {
namespace {

using nlohmann::json;

json token_json(const std::string& text, float logprob) {
  json bytes = json::array();
  for (char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

// choice.logprobs for `count` tokens: chat {"content": [...]}, completions the legacy lists.
json logprobs_json(const ResponseContext& ctx, const std::int32_t* tokens, const float* logprobs,
                   const std::vector<ember::TokenLogprob>* top, std::size_t count, std::size_t text_offset) {
  if (!ctx.logprobs || !ctx.token_text || logprobs == nullptr) return nullptr;
  if (ctx.endpoint == Endpoint::chat_completions) {
    json content = json::array();
    for (std::size_t i = 0; i < count; ++i) {
      json t = token_json(ctx.token_text(tokens[i]), logprobs[i]);
      json alts = json::array();
      if (top)
        for (const ember::TokenLogprob& a : top[i]) alts.push_back(token_json(ctx.token_text(a.token), a.logprob));
      t["top_logprobs"] = alts;
      content.push_back(t);
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json texts = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (std::size_t i = 0; i < count; ++i) {
    const std::string t = ctx.token_text(tokens[i]);
    texts.push_back(t);
    lps.push_back(logprobs[i]);
    offsets.push_back(text_offset);
    text_offset += t.size();
    json alts = json::object();
    if (top)
      for (const ember::TokenLogprob& a : top[i]) alts[ctx.token_text(a.token)] = a.logprob;
    tops.push_back(alts);
  }
  return {{"tokens", texts}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// A call's id: call_<response id>, then _2, _3 ... for the further calls of one reply.
std::string call_id(const ResponseContext& ctx, std::size_t index) {
  return "call_" + ctx.id + (index == 0 ? "" : "_" + std::to_string(index + 1));
}

json tool_calls_json(const ResponseContext& ctx, const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (std::size_t i = 0; i < calls.size(); ++i)
    out.push_back({{"id", call_id(ctx, i)},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  return out;
}

}  // namespace

const char* finish_reason_name(ember::FinishReason reason) {
  switch (reason) {
    case ember::FinishReason::stop: return "stop";
    case ember::FinishReason::length:
    case ember::FinishReason::context: return "length";
    case ember::FinishReason::cancelled: return "cancelled";
    case ember::FinishReason::error: return "error";
  }
  return "stop";
}

json usage_json(const ember::Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.generated_tokens},
          {"total_tokens", c.prompt_tokens + c.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_prompt_tokens}}},
          // OpenAI's names for predicted-output tokens: here the draft tokens of
          // speculative_tokens that the model confirmed, and those it did not.
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", c.speculative_accepted},
            {"rejected_prediction_tokens", c.speculative_proposed - c.speculative_accepted},
            {"reasoning_tokens", c.reasoning_tokens}}}};
}

namespace {

// Extensions: a structured output cut by max_tokens and closed early says so in its choice, and
// the JSON Schema keywords the grammar does not enforce are listed in "warnings" (never silent).
void add_structure_notes(json& body, json& choice, const ember::Completion& c) {
  if (c.closed_early) choice["closed_early"] = true;
  if (!c.schema_relaxed.empty()) body["warnings"] = c.schema_relaxed;
}

json envelope(const ResponseContext& ctx, bool chunk) {
  const bool chat = ctx.endpoint == Endpoint::chat_completions;
  return {{"id", ctx.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", ctx.created},
          {"model", ctx.model},
          {"system_fingerprint", std::string("ember-") + ember::version()}};
}

}  // namespace

json response_body(const ResponseContext& ctx, const ember::Completion& c) {
  json body = envelope(ctx, false);
  json choice = {
      {"index", 0},
      {"logprobs", logprobs_json(ctx, c.tokens.data(), c.logprobs.empty() ? nullptr : c.logprobs.data(),
                                 c.top_logprobs.empty() ? nullptr : c.top_logprobs.data(), c.tokens.size(), 0)},
      {"finish_reason", finish_reason_name(c.finish_reason)}};
  std::vector<ToolCall> calls;
  std::string content;
  if (ctx.endpoint == Endpoint::chat_completions && parse_tool_calls(ctx.tools, c.text, calls, content)) {
    choice["message"] = {{"role", "assistant"},
                         {"content", content.empty() ? json(nullptr) : json(content)},
                         {"tool_calls", tool_calls_json(ctx, calls)}};
    if (c.finish_reason == ember::FinishReason::stop) choice["finish_reason"] = "tool_calls";
  } else if (ctx.endpoint == Endpoint::chat_completions) {
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  } else {
    choice["text"] = c.text;
  }
  // A thinking model's reasoning, as DeepSeek, vLLM and llama-server return it.
  if (ctx.endpoint == Endpoint::chat_completions && !c.reasoning.empty())
    choice["message"]["reasoning_content"] = c.reasoning;
  add_structure_notes(body, choice, c);
  body["choices"] = json::array({choice});
  body["usage"] = usage_json(c);
  return body;
}

json stream_chunk(const ResponseContext& ctx, const std::string& text, const ember::Completion* finish) {
  json body = envelope(ctx, true);
  json choice = {{"index", 0},
                 {"logprobs", nullptr},
                 {"finish_reason", finish ? json(finish_reason_name(finish->finish_reason)) : json(nullptr)}};
  if (ctx.endpoint == Endpoint::chat_completions)
    choice["delta"] = finish && text.empty() ? json::object() : json{{"content", text}};
  else
    choice["text"] = text;
  if (finish) add_structure_notes(body, choice, *finish);
  body["choices"] = json::array({choice});
  return body;
}

json stream_role_chunk(const ResponseContext& ctx) {
  json body = envelope(ctx, true);
  body["choices"] = json::array({{{"index", 0},
                                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                                  {"logprobs", nullptr},
                                  {"finish_reason", nullptr}}});
  return body;
}

json stream_usage_chunk(const ResponseContext& ctx, const ember::Completion& c) {
  json body = envelope(ctx, true);
  body["choices"] = json::array();
  body["usage"] = usage_json(c);
  return body;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

namespace {

bool json_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The length of the longest proper prefix of `marker` that ends `s` (text to hold back: the
// marker may be arriving).
std::size_t partial_marker(const std::string& s, const std::string& marker) {
  for (std::size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.compare(s.size() - k, k, marker, 0, k) == 0) return k;
  return 0;
}

// Matches `{ "name" : "<name>" , "arguments" :` (or "parameters") at the start of `s`
// (whitespace anywhere between). Returns 1 and sets name/args_start when it does, 0 while `s`
// may still become it, -1 when it cannot.
int match_call_head(const std::string& s, std::string& name, std::size_t& args_start) {
  std::size_t i = 0;
  const auto skip = [&] {
    while (i < s.size() && json_space(s[i])) ++i;
  };
  // 1 when one of `words` comes next, 0 when the text ends inside one, -1 otherwise.
  const auto lit = [&](std::initializer_list<std::string_view> words) -> int {
    skip();
    int r = -1;
    for (std::string_view w : words) {
      const std::size_t n = std::min(w.size(), s.size() - i);
      if (s.compare(i, n, w.data(), n) != 0) continue;
      if (n < w.size()) {
        r = 0;
        continue;
      }
      i += w.size();
      return 1;
    }
    return r;
  };
  int r;
  if ((r = lit({"{"})) != 1 || (r = lit({"\"name\""})) != 1 || (r = lit({":"})) != 1 || (r = lit({"\""})) != 1)
    return r;
  std::string n;
  while (true) {  // function names are plain text (no escapes in the names ember accepts)
    if (i >= s.size()) return 0;
    if (s[i] == '\\') return -1;
    if (s[i] == '"') break;
    n += s[i++];
  }
  ++i;
  if ((r = lit({","})) != 1 || (r = lit({"\"arguments\"", "\"parameters\""})) != 1 || (r = lit({":"})) != 1) return r;
  skip();
  if (i >= s.size()) return 0;
  name = n;
  args_start = i;
  return 1;
}

}  // namespace

StreamMapper::StreamMapper(ResponseContext ctx) : ctx_(std::move(ctx)) {
  // The marked formats stream text until the opener; the bare ones decide at the first character.
  mode_ = markers(ctx_.tools.format).open.empty() ? Mode::undecided : Mode::scanning;
}

std::vector<json> StreamMapper::advance(bool final) {
  std::vector<json> out;
  const ToolMarkers& m = markers(ctx_.tools.format);
  const auto text = [&](const std::string& t) {
    if (!t.empty()) out.push_back(stream_chunk(ctx_, t, nullptr));
  };
  if (mode_ == Mode::undecided) {
    std::size_t i = 0;
    while (i < buffer_.size() && json_space(buffer_[i])) ++i;
    if (i == buffer_.size() && !final) return out;
    mode_ = i < buffer_.size() && buffer_[i] == '{' ? Mode::call : Mode::plain;
  }
  if (mode_ == Mode::scanning) {
    const std::size_t at = buffer_.find(m.open);
    if (at == std::string::npos) {
      const std::size_t keep = final ? 0 : partial_marker(buffer_, m.open);
      text(buffer_.substr(0, buffer_.size() - keep));
      buffer_.erase(0, buffer_.size() - keep);
      return out;
    }
    text(buffer_.substr(0, at));  // the reply's text before its call
    buffer_.erase(0, at + m.open.size());
    mode_ = Mode::call;
  }
  if (mode_ == Mode::call) {
    std::vector<json> call = flush_call(final);
    out.insert(out.end(), call.begin(), call.end());
  }
  if (mode_ == Mode::plain) text(buffer_);
  if (mode_ != Mode::call) buffer_.clear();
  return out;
}

std::vector<json> StreamMapper::flush_call(bool final) {
  std::vector<json> out;
  const ToolMarkers& m = markers(ctx_.tools.format);
  if (!header_sent_) {
    std::string name;
    const int r = match_call_head(buffer_, name, args_start_);
    if (r < 0 || (r == 0 && final) ||
        (r == 1 && std::find(ctx_.tools.names.begin(), ctx_.tools.names.end(), name) == ctx_.tools.names.end())) {
      mode_ = Mode::plain;  // not a call after all: the buffered text (with its opener) is the reply
      buffer_.insert(0, m.open);
      return out;
    }
    if (r == 0) return out;
    json chunk = stream_chunk(ctx_, "", nullptr);
    chunk["choices"][0]["delta"] = {{"tool_calls", json::array({{{"index", 0},
                                                                 {"id", call_id(ctx_, 0)},
                                                                 {"type", "function"},
                                                                 {"function", {{"name", name}, {"arguments", ""}}}}})}};
    out.push_back(chunk);
    header_sent_ = true;
    args_sent_ = args_start_;
  }
  // The arguments run to the call's closing brace (before the closer, in the marked formats):
  // hold back a trailing run of whitespace and braces (and a closer that may be arriving) until
  // the end is known, when the last brace is the call's own.
  std::size_t end = buffer_.size();
  bool closed = false;
  if (!m.close.empty()) {
    const std::size_t at = buffer_.find(m.close, args_start_);
    closed = at != std::string::npos;
    end = closed ? at : end - (final ? 0 : partial_marker(buffer_, m.close));
  }
  if (final || closed) {
    while (end > args_sent_ && json_space(buffer_[end - 1])) --end;
    if (end > args_sent_ && buffer_[end - 1] == '}') --end;
    while (end > args_sent_ && json_space(buffer_[end - 1])) --end;
  } else {
    while (end > args_sent_ && (json_space(buffer_[end - 1]) || buffer_[end - 1] == '}')) --end;
  }
  if (end > args_sent_) {
    json chunk = stream_chunk(ctx_, "", nullptr);
    chunk["choices"][0]["delta"] = {
        {"tool_calls",
         json::array({{{"index", 0}, {"function", {{"arguments", buffer_.substr(args_sent_, end - args_sent_)}}}}})}};
    out.push_back(chunk);
    args_sent_ = end;
  }
  if (closed) mode_ = Mode::done;  // one call per streamed reply; what follows is dropped
  return out;
}

std::vector<json> StreamMapper::on_chunk(const ember::Chunk& chunk) {
  std::vector<json> out;
  const std::string text(chunk.text);
  if (chunk.stream == ember::ChunkStream::reasoning) {  // reasoning_content deltas (chat only)
    if (ctx_.endpoint == Endpoint::chat_completions && !text.empty()) {
      json delta = stream_chunk(ctx_, "", nullptr);
      delta["choices"][0]["delta"] = {{"reasoning_content", text}};
      out.push_back(std::move(delta));
    }
    return out;
  }
  json lp = chunk.token_count > 0 ? logprobs_json(ctx_, chunk.tokens, chunk.logprobs, chunk.top_logprobs,
                                                  chunk.token_count, logprob_offset_)
                                  : json(nullptr);
  for (std::size_t i = 0; ctx_.token_text && i < chunk.token_count && chunk.logprobs; ++i)
    logprob_offset_ += ctx_.token_text(chunk.tokens[i]).size();
  if (ctx_.endpoint == Endpoint::chat_completions && ctx_.tools.active() && mode_ != Mode::plain) {
    if (mode_ != Mode::done) {
      buffer_ += text;
      out = advance(false);
    }
  } else if (!text.empty()) {
    out.push_back(stream_chunk(ctx_, text, nullptr));
  }
  if (!lp.is_null()) {
    if (out.empty()) out.push_back(stream_chunk(ctx_, "", nullptr));
    out.back()["choices"][0]["logprobs"] = lp;
  }
  return out;
}

std::vector<json> StreamMapper::finish(const ember::Completion& c) {
  std::vector<json> out;
  if (ctx_.endpoint == Endpoint::chat_completions && ctx_.tools.active() && mode_ != Mode::done) out = advance(true);
  buffer_.clear();
  json last = stream_chunk(ctx_, "", &c);
  if (header_sent_ && c.finish_reason == ember::FinishReason::stop) last["choices"][0]["finish_reason"] = "tool_calls";
  out.push_back(last);
  return out;
}

}  // namespace server