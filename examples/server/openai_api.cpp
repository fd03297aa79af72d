#include "openai_api.hpp"

#include "lora_endpoints.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <set>
#include <utility>

namespace server {
namespace {

using nlohmann::json;

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
                               "speculative_tokens", "close_at_limit", "reasoning_budget", "lora"};
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
    // Digits only, and within an id's range: "4294967361" must not wrap round to token 65, nor
    // " +65" pass for it.
    std::int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (key.empty() || key[0] == '-' || ec != std::errc() || end != key.data() + key.size())
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

}  // namespace

ApiError bad_field(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

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
  read_lora(body, out);
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

}  // namespace server
