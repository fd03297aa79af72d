#include "openai_api.hpp"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <utility>

namespace server {
namespace {

using nlohmann::json;

ApiError bad_field(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

// A present, non-null field, or nullptr.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool read_number(const json& body, const char* name, double lo, double hi, float& out) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_number()) throw bad_field(name, std::string("'") + name + "' must be a number");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi))  // also rejects NaN
    throw bad_field(name, std::string("'") + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump());
  out = static_cast<float>(d);
  return true;
}

bool read_int(const json& body, const char* name, std::int64_t lo, std::int64_t hi, int& out) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_number_integer()) throw bad_field(name, std::string("'") + name + "' must be an integer");
  const bool in_range = v->is_number_unsigned() ? v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                                      (lo <= 0 || v->get<std::uint64_t>() >= std::uint64_t(lo))
                                                : v->get<std::int64_t>() >= lo && v->get<std::int64_t>() <= hi;
  if (!in_range)
    throw bad_field(name,
                    std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  const std::int64_t i = v->get<std::int64_t>();
  out = static_cast<int>(i);
  return true;
}

bool read_bool(const json& body, const char* name, bool& out) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be a boolean");
  out = v->get<bool>();
  return true;
}

std::vector<std::string> read_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw bad_field("stop", "'stop' must be a string or an array of strings");
  std::vector<std::string> stops;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad_field("stop", "'stop' must be a string or an array of strings");
    if (!s.get_ref<const std::string&>().empty()) stops.push_back(s.get<std::string>());
  }
  if (stops.size() > 4) throw bad_field("stop", "'stop' takes at most 4 sequences");
  return stops;
}

// Message content is a string or, in newer clients, an array of {"type": "text", "text": ...}.
std::string read_content(const json& message, std::size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  const json* content = field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) throw bad_field(param, "'" + param + "' must be a string or an array");
  std::string text;
  for (const json& part : *content) {
    const json* t = part.is_object() ? field(part, "text") : nullptr;
    if (!t || !t->is_string() || part.value("type", "") != "text")
      throw bad_field(param, "'" + param + "' supports only text parts");
    text += t->get<std::string>();
  }
  return text;
}

std::vector<ember::Message> read_messages(const json& body, ToolFormat format) {
  const json* v = field(body, "messages");
  if (!v) throw bad_field("messages", "'messages' is required");
  if (!v->is_array() || v->empty()) throw bad_field("messages", "'messages' must be a non-empty array");
  std::vector<ember::Message> messages;
  bool previous_was_result = false;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(param, "'" + param + "' must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) throw bad_field(param + ".role", "'" + param + ".role' must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r == "tool") {                   // a function's result, as the chat family renders one
      const json* id = field(m, "tool_call_id");
      add_tool_result(format, id && id->is_string() ? id->get<std::string>() : std::string(), read_content(m, i),
                      messages, previous_was_result);
      previous_was_result = true;
      continue;
    }
    previous_was_result = false;
    if (r != "system" && r != "user" && r != "assistant")
      throw bad_field(param + ".role", "'" + param + ".role' must be system, user, assistant or tool");
    std::string content = read_content(m, i);
    if (const json* calls = r == "assistant" ? field(m, "tool_calls") : nullptr) {
      // The call as the family's model writes it.
      if (!calls->is_array()) throw bad_field(param + ".tool_calls", "'" + param + ".tool_calls' must be an array");
      for (const json& call : *calls) {
        const json* fn = call.is_object() ? field(call, "function") : nullptr;
        const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
        if (!name || !name->is_string())
          throw bad_field(param + ".tool_calls", "'" + param + ".tool_calls' entries need function.name");
        json args = json::object();
        if (const json* a = field(*fn, "arguments"); a && a->is_string())
          args = json::parse(a->get<std::string>(), nullptr, false);
        if (args.is_discarded()) args = field(*fn, "arguments")->get<std::string>();
        content += (content.empty() ? "" : "\n") + render_call(format, name->get<std::string>(), args);
      }
    }
    messages.push_back({r, content});
  }
  return messages;
}

void read_sampling(const json& body, Endpoint endpoint, ember::SamplingParams& s) {
  s.max_tokens = endpoint == Endpoint::completions ? 16 : 256;  // OpenAI's completions default
  int max_tokens = 0;
  if (read_int(body, "max_tokens", 0, 1 << 20, max_tokens) ||
      read_int(body, "max_completion_tokens", 0, 1 << 20, max_tokens))
    s.max_tokens = max_tokens;
  read_number(body, "temperature", 0.0, 2.0, s.temperature);
  read_number(body, "top_p", 0.0, 1.0, s.top_p);
  if (field(body, "top_p") && s.top_p == 0.0f) throw bad_field("top_p", "'top_p' must be > 0");
  read_number(body, "presence_penalty", -2.0, 2.0, s.presence_penalty);
  read_number(body, "frequency_penalty", -2.0, 2.0, s.frequency_penalty);
  read_number(body, "min_p", 0.0, 1.0, s.min_p);                        // extension, as in llama.cpp's server
  read_int(body, "top_k", 0, 1 << 20, s.top_k);                         // extension
  read_bool(body, "ignore_eos", s.ignore_eos);                          // extension
  read_int(body, "speculative_tokens", 0, 16, s.speculative_tokens);    // extension: draftless speculation
  read_int(body, "reasoning_budget", -1, 1 << 20, s.reasoning_budget);  // extension: thinking models
  // vLLM's and llama-server's way to turn a thinking model's thinking off.
  if (const json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw bad_field("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [key, value] : kwargs->items()) {
      if (key != "enable_thinking" || !value.is_boolean())
        throw bad_field("chat_template_kwargs." + key,
                        "ember-server takes only chat_template_kwargs.enable_thinking (a boolean)");
      if (!value.get<bool>()) s.reasoning_budget = 0;
    }
  }
  read_bool(body, "close_at_limit", s.close_at_limit);  // extension: close a structured output cut by max_tokens
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw bad_field("seed", "'seed' must be an integer");
    s.seed =
        seed->is_number_unsigned() ? seed->get<std::uint64_t>() : static_cast<std::uint64_t>(seed->get<std::int64_t>());
  }
  s.stop = read_stop(body);
  int n = 1;
  if (read_int(body, "n", 1, 1 << 20, n) && n != 1) throw bad_field("n", "'n' must be 1: one choice per request");
}

// The fields both endpoints take, and the ones of each endpoint's own.
std::set<std::string> fields_with(std::initializer_list<const char*> own) {
  // A table, packed: one name a line would take a screen.
  // clang-format off
  std::set<std::string> fields{"model", "user", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                               "presence_penalty", "frequency_penalty", "min_p", "top_k", "ignore_eos", "seed",
                               "stop", "n", "stream", "stream_options", "logit_bias", "logprobs", "response_format",
                               "speculative_tokens", "close_at_limit", "reasoning_budget"};
  // clang-format on
  fields.insert(own.begin(), own.end());
  return fields;
}

const std::set<std::string>& known_fields(Endpoint endpoint) {
  static const std::set<std::string> chat =
      fields_with({"messages", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs"});
  static const std::set<std::string> completions = fields_with({"prompt"});
  return endpoint == Endpoint::chat_completions ? chat : completions;
}

// OpenAI's {"token id": bias} with biases in [-100, 100]; the ids are checked by the engine.
void read_logit_bias(const json& body, ember::SamplingParams& s) {
  const json* v = field(body, "logit_bias");
  if (!v) return;
  if (!v->is_object()) throw bad_field("logit_bias", "'logit_bias' must be an object of token id -> bias");
  for (const auto& [key, bias] : v->items()) {
    std::int32_t id = 0;
    std::size_t used = 0;
    try {
      id = static_cast<std::int32_t>(std::stol(key, &used));
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != key.size())
      throw bad_field("logit_bias", "'logit_bias' keys must be token ids, got '" + key + "'");
    if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
      throw bad_field("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
    s.logit_bias.push_back({id, bias.get<float>()});
  }
}

void read_logprobs(const json& body, Endpoint endpoint, ember::SamplingParams& s) {
  if (endpoint == Endpoint::completions) {  // the legacy API: logprobs is the count of alternatives
    int n = 0;
    if (read_int(body, "logprobs", 0, 5, n)) {
      s.logprobs = true;
      s.top_logprobs = n;
    }
    return;
  }
  read_bool(body, "logprobs", s.logprobs);
  if (read_int(body, "top_logprobs", 0, 20, s.top_logprobs) && !s.logprobs && s.top_logprobs > 0)
    throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
}

// The body again with its members in their order: a schema's property order is the order the
// grammar generates them in (nlohmann::json sorts keys).
using ordered = nlohmann::ordered_json;

void read_response_format(const json& body, const ordered& in_order, ember::SamplingParams& s) {
  const json* v = field(body, "response_format");
  if (!v) return;
  const json* type = v->is_object() ? field(*v, "type") : nullptr;
  if (!type || !type->is_string())
    throw bad_field("response_format", "'response_format' must be an object with a 'type'");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    s.json_schema = R"({"type": "object"})";
    return;
  }
  if (t != "json_schema")
    throw bad_field("response_format.type", "'response_format.type' must be text, json_object or json_schema");
  const json* js = field(*v, "json_schema");
  if (!js || !js->is_object())
    throw bad_field("response_format.json_schema", "'response_format.json_schema' must be an object");
  if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean())
    throw bad_field("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
  const json* schema = field(*js, "schema");
  if (schema && !schema->is_object() && !schema->is_boolean())
    throw bad_field("response_format.json_schema.schema", "'response_format.json_schema.schema' must be a JSON Schema");
  // Strict or not, the schema is enforced.
  s.json_schema = schema ? in_order["response_format"]["json_schema"]["schema"].dump() : "{}";
}

ToolSpec read_tools(const json& body, const ordered& in_order, ToolFormat format, ParsedRequest& out) {
  ToolSpec spec;
  spec.format = format;
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  if (const json* p = field(body, "parallel_tool_calls"); p && !p->is_boolean())
    throw bad_field("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
  if (!tools) {
    if (choice && !(choice->is_string() && choice->get<std::string>() == "none"))
      throw bad_field("tool_choice", "'tool_choice' needs 'tools'");
    return spec;
  }
  if (!tools->is_array() || tools->empty()) throw bad_field("tools", "'tools' must be a non-empty array");
  std::vector<std::string> schemas;  // per tool: one call of it in the family's shape
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    const json* fn = t.is_object() ? field(t, "function") : nullptr;
    if (!fn || t.value("type", "") != "function" || !fn->is_object())
      throw bad_field(param, "'" + param + "' must be {\"type\": \"function\", \"function\": {...}}");
    const json* name = field(*fn, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty())
      throw bad_field(param + ".function.name", "'" + param + ".function.name' must be a non-empty string");
    const json* params = field(*fn, "parameters");
    if (params && !params->is_object())
      throw bad_field(param + ".function.parameters",
                      "'" + param + ".function.parameters' must be a JSON Schema object");
    spec.names.push_back(name->get<std::string>());
    const std::string arguments =
        params ? in_order["tools"][i]["function"]["parameters"].dump() : R"({"type": "object"})";
    schemas.push_back(call_schema(format, name->get<std::string>(), arguments));
  }
  spec.choice = ToolSpec::Choice::auto_;
  if (choice) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none")
        spec.choice = ToolSpec::Choice::none;
      else if (c == "required")
        spec.choice = ToolSpec::Choice::required;
      else if (c != "auto")
        throw bad_field("tool_choice", "'tool_choice' must be none, auto, required or a function");
    } else {
      const json* fn = choice->is_object() ? field(*choice, "function") : nullptr;
      const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      if (!name || !name->is_string())
        throw bad_field(
            "tool_choice",
            "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
      spec.named = name->get<std::string>();
      const auto it = std::find(spec.names.begin(), spec.names.end(), spec.named);
      if (it == spec.names.end()) throw bad_field("tool_choice", "'tool_choice' names a function not in 'tools'");
      spec.choice = ToolSpec::Choice::named;
      schemas = {schemas[static_cast<std::size_t>(it - spec.names.begin())]};
    }
  }
  if (!spec.active()) return spec;
  ember::SamplingParams& s = out.request.sampling;
  const bool forced = spec.choice != ToolSpec::Choice::auto_;
  if (forced && !s.json_schema.empty())
    throw bad_field("response_format",
                    "'response_format' cannot be combined with tool_choice required or a named function");
  // auto with a response_format: the reply follows the format; a call in it is still read.
  if (s.json_schema.empty()) {
    std::string any_of;
    for (const std::string& one : schemas) any_of += (any_of.empty() ? "" : ", ") + one;
    s.grammar = tool_grammar(format, schemas.size() == 1 ? schemas[0] : R"({"anyOf": [)" + any_of + "]}", forced);
  }
  add_tool_prompt(spec, *tools, out.request.messages);
  return spec;
}

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

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiError api_error(const ember::Error& e, Endpoint endpoint) {
  ApiError api;
  api.message = e.what();
  switch (e.code()) {
    case ember::ErrorCode::invalid_argument:
    case ember::ErrorCode::unsupported: break;
    case ember::ErrorCode::context_overflow:
      api.code = "context_length_exceeded";
      api.param = endpoint == Endpoint::chat_completions ? "messages" : "prompt";
      break;
    case ember::ErrorCode::busy:  // OpenAI's answer to too many requests: retry later
      api.status = 429;
      api.type = "rate_limit_error";
      api.code = "rate_limit_exceeded";
      break;
    default:
      api.status = 500;
      api.type = "server_error";
      api.code = ember::to_string(e.code());
  }
  return api;
}

// The deepest nesting of arrays and objects in `text` (strings skipped), counted before parsing
// so that a body of a million '[' costs a scan, not a million parsed values.
static int json_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

ParsedRequest parse_request(Endpoint endpoint, const std::string& body_text, std::uint64_t default_seed,
                            ToolFormat tool_format) {
  if (json_depth(body_text) > kMaxJsonDepth) {
    ApiError e;
    e.message = "the request body nests arrays and objects more than " + std::to_string(kMaxJsonDepth) + " levels deep";
    e.code = "invalid_json";
    throw e;
  }
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    ApiError e;
    e.message = "the request body is not valid JSON";
    e.code = "invalid_json";
    throw e;
  }
  if (!body.is_object()) throw bad_field("", "the request body must be a JSON object");
  for (const auto& [key, value] : body.items())
    if (!known_fields(endpoint).count(key)) throw bad_field(key, "'" + key + "' is not supported by ember-server");

  ParsedRequest out;
  out.request.sampling.seed = default_seed;
  read_sampling(body, endpoint, out.request.sampling);
  read_logit_bias(body, out.request.sampling);
  read_logprobs(body, endpoint, out.request.sampling);
  const ordered in_order = ordered::parse(body_text, nullptr, /*allow_exceptions=*/false);
  read_response_format(body, in_order, out.request.sampling);
  if (endpoint == Endpoint::completions) {
    const json* prompt = field(body, "prompt");
    if (!prompt) throw bad_field("prompt", "'prompt' is required");
    if (!prompt->is_string()) throw bad_field("prompt", "'prompt' must be a string");
    out.request.prompt = prompt->get<std::string>();
  } else {
    out.request.messages = read_messages(body, tool_format);
    out.tools = read_tools(body, in_order, tool_format, out);
  }
  read_bool(body, "stream", out.stream);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) throw bad_field("stream_options", "'stream_options' must be an object");
    for (const auto& [key, value] : options->items())
      if (key != "include_usage")
        throw bad_field("stream_options." + key, "'stream_options." + key + "' is not supported by ember-server");
    read_bool(*options, "include_usage", out.include_usage);
  }
  return out;
}

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

}  // namespace server

namespace server {
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
