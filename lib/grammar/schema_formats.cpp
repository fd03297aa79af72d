#include "grammar/schema_formats.hpp"

namespace ember::grammar {

const std::vector<Primitive>& schema_primitives() {
  static const std::vector<Primitive> p = {
      {"ws", R"(| " " | "\n" [ \t]{0,20})", {}},
      {"json-hex", R"([0-9a-fA-F])", {}},
      // \u escapes of surrogates are left out: validators count a pair as one character.
      {"json-char",
       R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] json-hex json-hex json-hex | [dD] [0-7] json-hex json-hex)))",
       {"json-hex"}},
      {"json-string", R"("\"" json-char* "\"")", {"json-char"}},
      {"json-int", R"("-"? ("0" | [1-9] [0-9]{0,15}))", {}},
      {"json-number", R"("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)", {}},
      {"json-bool", R"("true" | "false")", {}},
      {"json-null", R"("null")", {}},
      // Any JSON value, at most 6 containers deep (json-value-1 .. -6 are the nested levels;
      // the deepest holds only scalars): narrower than JSON, and a model that keeps opening
      // containers must close them.
      {"json-scalar",
       R"(json-string | json-number | json-bool | json-null)",
       {"json-string", "json-number", "json-bool", "json-null"}},
      {"json-value", R"(json-object | json-array | json-scalar)", {"json-object", "json-array", "json-scalar"}},
      {"json-object",
       R"("{" ws (json-string ws ":" ws json-value-1 (ws "," ws json-string ws ":" ws json-value-1)*)? ws "}")",
       {"ws", "json-string", "json-value-1"}},
      {"json-array", R"("[" ws (json-value-1 (ws "," ws json-value-1)*)? ws "]")", {"ws", "json-value-1"}},
      {"json-value-1",
       R"("{" ws (json-string ws ":" ws json-value-2 (ws "," ws json-string ws ":" ws json-value-2)*)? ws "}" | "[" ws (json-value-2 (ws "," ws json-value-2)*)? ws "]" | json-scalar)",
       {"ws", "json-scalar", "json-value-2"}},
      {"json-value-2",
       R"("{" ws (json-string ws ":" ws json-value-3 (ws "," ws json-string ws ":" ws json-value-3)*)? ws "}" | "[" ws (json-value-3 (ws "," ws json-value-3)*)? ws "]" | json-scalar)",
       {"ws", "json-scalar", "json-value-3"}},
      {"json-value-3",
       R"("{" ws (json-string ws ":" ws json-value-4 (ws "," ws json-string ws ":" ws json-value-4)*)? ws "}" | "[" ws (json-value-4 (ws "," ws json-value-4)*)? ws "]" | json-scalar)",
       {"ws", "json-scalar", "json-value-4"}},
      {"json-value-4",
       R"("{" ws (json-string ws ":" ws json-value-5 (ws "," ws json-string ws ":" ws json-value-5)*)? ws "}" | "[" ws (json-value-5 (ws "," ws json-value-5)*)? ws "]" | json-scalar)",
       {"ws", "json-scalar", "json-value-5"}},
      {"json-value-5",
       R"("{" ws (json-string ws ":" ws json-value-6 (ws "," ws json-string ws ":" ws json-value-6)*)? ws "}" | "[" ws (json-value-6 (ws "," ws json-value-6)*)? ws "]" | json-scalar)",
       {"ws", "json-scalar", "json-value-6"}},
      {"json-value-6", R"(json-scalar)", {"json-scalar"}},
      {"json-date",
       R"([1-9] [0-9]{3} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))",
       {}},
      {"json-time",
       R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
       {}},
      // Matches nothing: what a recursive $ref becomes past kMaxRefDepth levels.
      {"json-never", R"([^\x00-\U0010FFFF])", {}},
      {"json-uuid", R"(json-hex{8} "-" json-hex{4} "-" json-hex{4} "-" json-hex{4} "-" json-hex{12})", {"json-hex"}},
      {"json-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])", {}},
      {"json-ipv4", R"(json-octet "." json-octet "." json-octet "." json-octet)", {"json-octet"}},
      {"json-ipv6", R"(json-hex{1,4} (":" json-hex{1,4}){7})", {"json-hex"}},
      {"json-label", R"([a-zA-Z0-9]{1,20} ("-" [a-zA-Z0-9]{1,20}){0,2})", {}},
      {"json-hostname", R"(json-label ("." json-label){0,3})", {"json-label"}},
      {"json-email", R"([a-zA-Z0-9_%+-]{1,20} ("." [a-zA-Z0-9_%+-]{1,20}){0,2} "@" json-hostname)", {"json-hostname"}},
      {"json-uri-char", R"([a-zA-Z0-9._~!$&'()*+,;=:@-] | "%" json-hex json-hex)", {"json-hex"}},
      {"json-uri-tail",
       R"(("/" json-uri-char{0,40}){0,8} ("?" (json-uri-char | [/?]){0,60})? ("#" (json-uri-char | [/?]){0,40})?)",
       {"json-uri-char"}},
      {"json-uri",
       R"([a-zA-Z] [a-zA-Z0-9+.-]{0,15} "://" json-hostname (":" [0-9]{1,5})? json-uri-tail)",
       {"json-hostname", "json-uri-tail"}},
      {"json-uri-reference",
       R"(json-uri | "/"? ([a-zA-Z0-9._~!$&'()*+,;=@-] | "%" json-hex json-hex){1,40} json-uri-tail | "#" (json-uri-char | [/?]){0,40})",
       {"json-uri", "json-uri-tail"}},
      {"json-duration-n", R"([0-9]{1,4})", {}},
      {"json-duration",
       R"("P" (json-duration-date ("T" json-duration-time)? | "T" json-duration-time | json-duration-n "W"))",
       {"json-duration-date", "json-duration-time", "json-duration-n"}},
      {"json-duration-date",
       R"(json-duration-n "Y" (json-duration-n "M")? (json-duration-n "D")? | json-duration-n "M" (json-duration-n "D")? | json-duration-n "D")",
       {"json-duration-n"}},
      {"json-duration-time",
       R"(json-duration-n "H" (json-duration-n "M")? (json-duration-n "S")? | json-duration-n "M" (json-duration-n "S")? | json-duration-n "S")",
       {"json-duration-n"}},
      {"json-date-time", R"(json-date "T" json-time)", {"json-date", "json-time"}},
      {"json-pointer", R"(("/" ([a-zA-Z0-9_ .-] | "~" [01]){0,30}){0,8})", {}},
      {"json-regex", R"([a-zA-Z0-9 _-]{0,60})", {}},
  };
  return p;
}

std::optional<std::string> format_primitive(std::string_view f) {
  static const std::vector<std::pair<std::string_view, const char*>> formats = {{"date", "json-date"},
                                                                                {"time", "json-time"},
                                                                                {"date-time", "json-date-time"},
                                                                                {"duration", "json-duration"},
                                                                                {"uuid", "json-uuid"},
                                                                                {"ipv4", "json-ipv4"},
                                                                                {"ipv6", "json-ipv6"},
                                                                                {"hostname", "json-hostname"},
                                                                                {"idn-hostname", "json-hostname"},
                                                                                {"email", "json-email"},
                                                                                {"idn-email", "json-email"},
                                                                                {"uri", "json-uri"},
                                                                                {"iri", "json-uri"},
                                                                                {"uri-reference", "json-uri-reference"},
                                                                                {"iri-reference", "json-uri-reference"},
                                                                                {"uri-template", "json-uri-reference"},
                                                                                {"json-pointer", "json-pointer"},
                                                                                {"regex", "json-regex"}};
  for (const auto& [name, rule] : formats)
    if (name == f) return std::string(rule);
  return std::nullopt;
}

}  // namespace ember::grammar
