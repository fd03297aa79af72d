// The GBNF building blocks of JSON Schema grammars: JSON's own values and the string formats.
// A converter emits only the primitives it uses (and what they use, listed in `uses`).
//
// Formats enforced (the string content, quotes excluded): date, time, date-time (RFC 3339;
// time needs its offset), duration (ISO 8601, each field up to 4 digits), uuid, ipv4, ipv6 (the
// uncompressed form only: narrower), hostname and idn-hostname (up to 4 labels of up to 3
// hyphen-joined runs of 20 letters and digits: narrower), email and idn-email (dot-separated
// atoms @ hostname), uri and iri (scheme "://" host, optional port, path, query and fragment of
// unreserved, sub-delims and %-escapes), uri-reference, iri-reference and uri-template (a uri or
// a relative reference of those characters), json-pointer, regex (letters, digits, spaces, _
// and -: a literal is a valid regex). Any other format is an annotation (JSON Schema 2020-12's
// default) and is not enforced; the converter records that as a relaxation.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::grammar {

struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

const std::vector<Primitive>& schema_primitives();

// The primitive generating a format's string content, or nullopt when the format is not enforced.
std::optional<std::string> format_primitive(std::string_view format);

}  // namespace ember::grammar
