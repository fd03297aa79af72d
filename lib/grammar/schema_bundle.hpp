// JSON Schema compound documents and remote references, made local before normalisation.
//
// A $ref is resolved against its base URI (RFC 3986): the nearest enclosing `$id` (draft-04:
// `id`), resolved in turn against its parent's, the root's own or none. Targets are
//   * a resource inside the document (an embedded schema with its own `$id`), with a JSON
//     pointer relative to that resource or an anchor (`$anchor`, `$dynamicAnchor`, a draft-07
//     `"$id": "#name"`);
//   * another document, which only the embedder can supply (SchemaResolver: ember never reads a
//     file or the network for it). Its text is parsed and its own $refs resolved the same way,
//     against its `$id` or, without one, the URI it was asked for.
// bundle_schema() rewrites every $ref into a local JSON pointer of one document: the root, with
// the documents it needed appended under "x-ember-documents" (an unknown keyword, so it
// validates nothing). A schema without embedded resources or remote $refs is left as it is.
#pragma once

#include "grammar/json_value.hpp"

#include <ember/ember.hpp>

#include <string>
#include <string_view>

namespace ember::grammar {

// `ref` resolved against `base` (RFC 3986 section 5.2, without normalising case or
// percent-escapes); "" for `base` leaves a relative reference relative.
std::string resolve_uri(std::string_view base, std::string_view ref);

// Rewrites `root`'s $refs as above. A $ref to a document `resolver` does not have (or with no
// resolver) is left naming its absolute URI, refused where the schema reaches it. Throws
// Error(invalid_argument) for a supplied document that is not JSON, and past kMaxDocuments
// documents for one schema.
void bundle_schema(JsonValue& root, const SchemaResolver& resolver);

inline constexpr int kMaxDocuments = 64;

}  // namespace ember::grammar
