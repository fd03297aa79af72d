#include "tool_format.hpp"

#include <algorithm>
#include <cstdio>

namespace server {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

std::string compact(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string trim(const std::string& s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  std::size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// A GBNF literal of ASCII text, every byte escaped (so no character of the text can end it).
std::string literal(const std::string& text) {
  std::string out = "\"";
  char buf[8];
  for (unsigned char c : text) {
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    out += buf;
  }
  return out + "\"";
}

// Rules `name-0` .. `name-(n-1)` for "any text that does not contain `opener`, then, if the
// opener comes, `then`": the states of the string-matching automaton of the opener (state i:
// the text ends with its first i bytes). Every alternative ends in a rule in tail position, so
// the matcher's stacks stay one deep however long the text. The opener is ASCII: every other
// character (and every multi-byte one) goes back to state 0 or 1 as plain bytes would.
std::string text_without(const std::string& opener, const std::string& name, const std::string& then) {
  const std::size_t n = opener.size();
  // The state after reading byte c in state i: the longest prefix of the opener that ends the
  // text opener[0, i) + c.
  const auto next = [&](std::size_t i, char c) {
    const std::string t = opener.substr(0, i) + c;
    for (std::size_t k = std::min(n, t.size()); k > 0; --k)
      if (t.compare(t.size() - k, k, opener, 0, k) == 0) return k;
    return std::size_t{0};
  };
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string alts, excluded;
    std::string seen;
    for (char c : opener) {
      if (seen.find(c) != std::string::npos) continue;
      seen += c;
      const std::size_t j = next(i, c);
      if (j == 0) continue;
      alts += " | " + literal(std::string(1, c)) + " " + (j == n ? then : name + "-" + std::to_string(j));
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned char>(c));
      excluded += buf;
    }
    // The empty alternative first: the text may end in any state.
    out += name + "-" + std::to_string(i) + " ::= | [^" + excluded + "] " + name + "-0" + alts + "\n";
  }
  return out;
}

}  // namespace

const char* to_string(ToolFormat format) {
  switch (format) {
    case ToolFormat::hermes: return "hermes";
    case ToolFormat::llama3: return "llama3";
    case ToolFormat::gemma: return "gemma";
    case ToolFormat::phi: return "phi";
    case ToolFormat::generic: return "generic";
  }
  return "generic";
}

ToolFormat tool_format_of_rendering(const std::string& probe) {
  if (probe.find("<|im_start|>") != std::string::npos) return ToolFormat::hermes;
  if (probe.find("<|start_header_id|>") != std::string::npos) return ToolFormat::llama3;
  if (probe.find("<start_of_turn>") != std::string::npos) return ToolFormat::gemma;
  if (probe.find("<|user|>") != std::string::npos) return ToolFormat::phi;
  return ToolFormat::generic;
}

const ToolMarkers& markers(ToolFormat format) {
  static const ToolMarkers hermes{"<tool_call>", "</tool_call>", "arguments"};
  static const ToolMarkers phi{"<|tool_call|>", "<|/tool_call|>", "arguments"};
  static const ToolMarkers bare_parameters{"", "", "parameters"};
  static const ToolMarkers bare_arguments{"", "", "arguments"};
  switch (format) {
    case ToolFormat::hermes: return hermes;
    case ToolFormat::phi: return phi;
    case ToolFormat::llama3:
    case ToolFormat::gemma: return bare_parameters;
    case ToolFormat::generic: break;
  }
  return bare_arguments;
}

void add_tool_prompt(const ToolSpec& spec, const json& tools, std::vector<ember::Message>& messages) {
  const ToolMarkers& m = markers(spec.format);
  const std::string shape = "{\"name\": <function-name>, \"" + std::string(m.arguments_key) + "\": <args-json-object>}";
  std::string when;  // what the reply must be, by tool_choice
  if (spec.choice == ToolSpec::Choice::named)
    when = "Call the function " + spec.named + ".";
  else if (spec.choice == ToolSpec::Choice::required)
    when = "Call one of the functions.";
  else
    when = "Call a function only when it helps; otherwise answer in plain text.";
  std::string text;
  bool in_system = true;
  switch (spec.format) {
    case ToolFormat::hermes:  // Qwen2.5's template, word for word, then the choice
      text =
          "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
          "function signatures within <tools></tools> XML tags:\n<tools>";
      for (const json& t : tools) text += "\n" + compact(t);
      text +=
          "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
          "<tool_call></tool_call> XML tags:\n<tool_call>\n" +
          shape + "\n</tool_call>\n" + when;
      break;
    case ToolFormat::llama3:  // Llama 3.1's template (tools in the first user message)
      text =
          "Given the following functions, please respond with a JSON for a function call with its proper arguments "
          "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
          "dictionary of argument name and its value}.Do not use variables. " +
          when + "\n\n";
      for (const json& t : tools) text += t.dump(4) + "\n\n";
      in_system = false;
      break;
    case ToolFormat::gemma:  // Google's Gemma 3 function-calling prompt, its JSON variant
      text =
          "You have access to functions. If you decide to invoke any of the function(s), you MUST put it in the "
          "format of\n{\"name\": function name, \"parameters\": dictionary of argument name and its value}\n\nYou "
          "SHOULD NOT include any other text in the response if you call a function. " +
          when + "\n";
      {
        json list = json::array();
        for (const json& t : tools) list.push_back(t["function"]);
        text += list.dump(2) + "\n\n";
      }
      in_system = false;
      break;
    case ToolFormat::phi: {  // Phi-4-mini's markers, with the instruction Phi-3 needs
      json list = json::array();
      for (const json& t : tools) list.push_back(t["function"]);
      text = "<|tool|>" + compact(list) + "<|/tool|>\nTo call a function, reply with <|tool_call|>" + shape +
             "<|/tool_call|>. " + when;
      break;
    }
    case ToolFormat::generic:  // ember's own: the functions, then the shape of a call
      text = "You can call these functions:\n";
      for (const json& t : tools) {
        const json& fn = t["function"];
        json d = {{"name", fn["name"]}};
        if (fn.contains("description")) d["description"] = fn["description"];
        d["parameters"] = fn.contains("parameters") ? fn["parameters"] : json::object();
        text += compact(d) + "\n";
      }
      text += "To call a function, reply with only a JSON object " + shape + ". " + when;
      break;
  }
  if (in_system) {
    if (!messages.empty() && messages[0].role == "system")
      messages[0].content += "\n\n" + text;
    else
      messages.insert(messages.begin(), {"system", text});
    return;
  }
  const auto user =
      std::find_if(messages.begin(), messages.end(), [](const ember::Message& x) { return x.role == "user"; });
  if (user != messages.end())
    user->content = text + user->content;
  else
    messages.push_back({"user", text});
}

std::string render_call(ToolFormat format, const std::string& name, const json& arguments) {
  const ToolMarkers& m = markers(format);
  // The name first, as the call grammar generates it (json would sort the keys).
  ordered call_json;
  call_json["name"] = name;
  call_json[m.arguments_key] = ordered::parse(arguments.dump());
  const std::string call = call_json.dump(-1, ' ', false, json::error_handler_t::replace);
  if (format == ToolFormat::hermes) return m.open + "\n" + call + "\n" + m.close;
  return m.open + call + m.close;
}

void add_tool_result(ToolFormat format, const std::string& call_id, const std::string& content,
                     std::vector<ember::Message>& messages, bool previous_was_result) {
  std::string role = "user", text;
  switch (format) {
    case ToolFormat::hermes: text = "<tool_response>\n" + content + "\n</tool_response>"; break;
    case ToolFormat::llama3:
      role = "ipython";
      text = content;
      break;
    default: text = "Result of the function call" + (call_id.empty() ? "" : " " + call_id) + ":\n" + content;
  }
  if (previous_was_result && !messages.empty() && messages.back().role == role)
    messages.back().content += "\n" + text;
  else
    messages.push_back({role, text});
}

std::string call_schema(ToolFormat format, const std::string& name, const std::string& parameters_schema) {
  return R"({"type": "object", "properties": {"name": {"const": )" + json(name).dump() + R"(}, ")" +
         markers(format).arguments_key + R"(": )" + parameters_schema + R"(}, "required": ["name", ")" +
         markers(format).arguments_key + R"("], "additionalProperties": false})";
}

std::string tool_grammar(ToolFormat format, const std::string& schema, bool forced) {
  const ToolMarkers& m = markers(format);
  std::string out;
  const std::string call_rules = ember::json_schema_to_gbnf(schema, "tool-call");
  if (m.open.empty()) {
    // A bare call, or (auto) any reply whose first character past the spaces is not `{`.
    out = forced ? "root ::= tool-call\n" : "root ::= [ \\t\\n\\r]* (tool-call | [^{ \\t\\n\\r] .*)?\n";
  } else {
    const std::string block = "tool-space tool-call tool-space " + literal(m.close);
    out = "tool-space ::= [ \\t\\n]{0,3}\n";
    out += forced ? "root ::= " + literal(m.open) + " " + block + "\n"
                  : "root ::= tool-text-0\n" + text_without(m.open, "tool-text", block);
  }
  return out + call_rules;
}

bool parse_tool_calls(const ToolSpec& tools, const std::string& text, std::vector<ToolCall>& calls,
                      std::string& content) {
  calls.clear();
  content.clear();
  if (!tools.active()) return false;
  const auto read_call = [&](const std::string& s) {
    const json v = json::parse(trim(s), nullptr, false);
    if (v.is_discarded() || !v.is_object() || v.size() != 2 || !v.contains("name") || !v["name"].is_string())
      return false;
    const auto args = v.find("arguments") != v.end() ? v.find("arguments") : v.find("parameters");
    if (args == v.end() || !args->is_object()) return false;
    const std::string name = v["name"].get<std::string>();
    if (std::find(tools.names.begin(), tools.names.end(), name) == tools.names.end()) return false;
    calls.push_back({name, compact(*args)});
    return true;
  };
  const ToolMarkers& m = markers(tools.format);
  const std::size_t first = m.open.empty() ? std::string::npos : text.find(m.open);
  if (first == std::string::npos) {
    calls.clear();
    return read_call(text);  // a bare call: the whole reply
  }
  content = trim(text.substr(0, first));
  for (std::size_t at = first; at != std::string::npos; at = text.find(m.open, at)) {
    const std::size_t begin = at + m.open.size();
    std::size_t end = text.find(m.close, begin);
    const bool closed = end != std::string::npos;
    if (!closed) end = text.size();  // the reply may end at the call (max_tokens, a stop)
    if (!read_call(text.substr(begin, end - begin))) {
      calls.clear();
      content.clear();
      return false;
    }
    at = closed ? end + m.close.size() : std::string::npos;
  }
  return true;
}

}  // namespace server
