// oneOf, honoured exactly: a grammar can say "one of these" only as "any of these", which is
// the same language exactly when no value matches two branches. The converter therefore
// accepts a oneOf only when its branches are shown pairwise disjoint by one of these simple
// reasons, and refuses it (naming the two branches) otherwise:
//   * their types cannot meet (integer meets number);
//   * their const/enum values differ (or none of one's values has a type the other allows);
//   * both are objects that require one property whose const/enum values differ (a tagged
//     union, Pydantic's discriminated unions), or whose schemas are disjoint by these reasons;
//   * one is only objects and requires a property the other (additionalProperties false, no
//     patternProperties) does not list.
// $refs are followed; anything else counts as "may overlap".
#pragma once

#include "grammar/json_value.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace ember::grammar {

// The value a local JSON pointer ("#", "#/$defs/a") names in `root`, or nullptr; `last`
// receives its last reference token ("" for "#").
const JsonValue* resolve_pointer(const JsonValue& root, std::string_view ref, std::string* last = nullptr);

// False only when no JSON value can validate against both `a` and `b` (see above).
bool may_overlap(const JsonValue& a, const JsonValue& b, const JsonValue& root);

// A oneOf whose branches are all plain `required` lists ({"required": [...]}, perhaps with
// "type": "object" and annotations: "exactly one of these sets of names present"), rewritten
// as disjoint branches whose union says it: branch i is an object that requires its names and
// has none of the names another branch requires beyond them. Exact when each other branch adds
// at most one name (otherwise narrower: all of them absent, where one would do); a branch whose
// names include another's matches both and becomes `false`. nullopt for any other oneOf.
std::optional<JsonValue> exclusive_required(const JsonValue& one_of);

}  // namespace ember::grammar
