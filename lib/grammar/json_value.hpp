// A small JSON reader for JSON Schemas (the library links no JSON package): values keep their
// object member order (a schema's property order is the order properties are generated in)
// and a number's original text (enum and const values are written back as given).
//
// Thread-safety: values are plain data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::grammar {

struct JsonMember;

struct JsonValue {
  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  std::string text;                 // string: the decoded text; number: its source text
  std::vector<JsonValue> items;     // array
  std::vector<JsonMember> members;  // object, in source order

  const JsonValue* find(std::string_view key) const;  // object member or nullptr
  bool is_integer() const;                            // a number without fraction or exponent
  // Compact JSON text (strings escaped as JSON requires, numbers as given).
  std::string dump() const;
};

// One member of an object. (Not std::pair: a pair of a type still incomplete inside its own
// definition is refused by Clang with libstdc++; a vector of an incomplete struct is fine.)
struct JsonMember {
  std::string first;
  JsonValue second;
};

// The JSON literal true or false.
JsonValue json_bool(bool b);

// Parses one JSON document (RFC 8259; nesting at most 512 deep). Throws Error(invalid_argument)
// naming the line and column of the first error. `what` names the document in messages.
JsonValue parse_json(std::string_view text, std::string_view what = "JSON");

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace ember::grammar
