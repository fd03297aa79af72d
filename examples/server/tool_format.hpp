// Tool calls in each chat family's own format: how the tools are described to the model, how
// its calls and their results go back into the conversation, the grammar that constrains a
// call, and how a reply is read back as OpenAI tool_calls.
//
//   family  (chat template)     tools described in        a call is                              a result is
//   hermes  (ChatML: Qwen2.5,   the system message,       <tool_call>\n{"name", "arguments"}     a user turn <tool_response>...
//            SmolLM2)           <tools>...</tools>        \n</tool_call>                         </tool_response>
//   llama3  (Llama 3.1+)        the first user message    {"name", "parameters"}, bare           an ipython turn
//   gemma   (Gemma 2/3)         the first user message    {"name", "parameters"}, bare           a user turn
//   phi     (Phi-3/3.5)         the system message,       <|tool_call|>{"name", "arguments"}     a user turn
//                               <|tool|>...<|/tool|>      <|/tool_call|>
//   generic (Llama 2, Mistral,  the system message        {"name", "arguments"}, bare            a user turn
//            anything else)
//
// Hermes and Llama 3.1 are the formats their templates (Qwen2.5's, Meta's) render; Gemma's is
// the JSON variant of Google's Gemma 3 function-calling prompt (Gemma has no tool tokens);
// Phi-3 has none, so ember uses Phi-4-mini's markers with an explicit instruction.
//
// tool_choice auto: generation is free until the family's call opener appears, then the call
// is constrained to the tools' schemas: for the marked formats a grammar that accepts any text
// not containing the opener, then the opener and a call; for the bare formats any reply that
// does not start with `{`, or a call. required / a named function: the reply is one call.
#pragma once

#include <ember/ember.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace server {

enum class ToolFormat { hermes, llama3, gemma, phi, generic };
const char* to_string(ToolFormat format);

// The family of the chat template that rendered `probe` (a one-message conversation rendered
// by Engine::apply_chat_template): the public API does not name templates, their markers do.
ToolFormat tool_format_of_rendering(const std::string& probe);

// The tools of a chat request and how the model may use them.
struct ToolSpec {
  enum class Choice { none, auto_, required, named };
  Choice choice = Choice::none;    // none also when the request has no tools
  std::vector<std::string> names;  // the functions' names, in the request's order
  std::string named;               // tool_choice {"type": "function", "function": {"name"}}
  ToolFormat format = ToolFormat::generic;
  bool active() const { return choice != Choice::none; }
};

struct ToolMarkers {
  std::string open, close;    // around a call; empty for the bare formats
  const char* arguments_key;  // the member that holds the arguments in the family's calls
};
const ToolMarkers& markers(ToolFormat format);

// Describes `tools` (the request's array, validated) to the model where the family's template
// puts them, with the instruction that fits `spec.choice`.
void add_tool_prompt(const ToolSpec& spec, const nlohmann::json& tools, std::vector<ember::Message>& messages);

// An assistant turn's call as the family's model writes it.
std::string render_call(ToolFormat format, const std::string& name, const nlohmann::json& arguments);
// Appends a function's result as the family's turn. With `previous_was_result` it joins the
// last message instead: consecutive results share one turn (Gemma's turns must alternate).
void add_tool_result(ToolFormat format, const std::string& call_id, const std::string& content,
                     std::vector<ember::Message>& messages, bool previous_was_result);

// The JSON Schema of one call of a function in the family's shape.
std::string call_schema(ToolFormat format, const std::string& name, const std::string& parameters_schema);
// The GBNF a reply must follow: `call_schema` (a JSON Schema of the allowed calls) inside the
// family's markers, alone (`forced`) or after free text (tool_choice auto).
std::string tool_grammar(ToolFormat format, const std::string& call_schema, bool forced);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object
};
// The calls in a reply, in the family's format (a bare {"name", "arguments"|"parameters"} reply
// is read as a call in every family); `content` receives the text before the first call.
// False when the reply holds no well-formed call of a known function.
bool parse_tool_calls(const ToolSpec& tools, const std::string& text, std::vector<ToolCall>& calls,
                      std::string& content);

}  // namespace server
