#include "grammar/schema_bundle.hpp"

#include "grammar/schema_normalize.hpp"
#include "grammar/schema_overlap.hpp"
#include "util/check.hpp"

#include <cctype>
#include <deque>
#include <map>
#include <set>
#include <vector>

namespace ember::grammar {
namespace {

using Type = JsonValue::Type;

struct Uri {
  std::string scheme, authority, path, query, fragment;
  bool has_scheme = false, has_authority = false, has_query = false, has_fragment = false;
};

Uri parse_uri(std::string_view s) {
  Uri u;
  const std::size_t colon = s.find(':');
  if (colon != std::string_view::npos && colon > 0 && std::isalpha(static_cast<unsigned char>(s[0]))) {
    bool scheme = true;
    for (std::size_t i = 0; i < colon; ++i) {
      const char c = s[i];
      scheme &= std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
    }
    if (scheme) {
      u.has_scheme = true;
      u.scheme = std::string(s.substr(0, colon));
      s.remove_prefix(colon + 1);
    }
  }
  if (const std::size_t hash = s.find('#'); hash != std::string_view::npos) {
    u.has_fragment = true;
    u.fragment = std::string(s.substr(hash + 1));
    s = s.substr(0, hash);
  }
  if (const std::size_t q = s.find('?'); q != std::string_view::npos) {
    u.has_query = true;
    u.query = std::string(s.substr(q + 1));
    s = s.substr(0, q);
  }
  if (s.substr(0, 2) == "//") {
    u.has_authority = true;
    const std::size_t slash = s.find('/', 2);
    u.authority = std::string(s.substr(2, slash == std::string_view::npos ? std::string_view::npos : slash - 2));
    s = slash == std::string_view::npos ? std::string_view() : s.substr(slash);
  }
  u.path = std::string(s);
  return u;
}

std::string compose(const Uri& u) {
  std::string out;
  if (u.has_scheme) out += u.scheme + ":";
  if (u.has_authority) out += "//" + u.authority;
  out += u.path;
  if (u.has_query) out += "?" + u.query;
  if (u.has_fragment) out += "#" + u.fragment;
  return out;
}

// RFC 3986 5.2.4.
std::string remove_dot_segments(std::string in) {
  std::string out;
  while (!in.empty()) {
    if (in.rfind("../", 0) == 0) {
      in.erase(0, 3);
    } else if (in.rfind("./", 0) == 0) {
      in.erase(0, 2);
    } else if (in.rfind("/./", 0) == 0) {
      in.erase(0, 2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.rfind("/../", 0) == 0 || in == "/..") {
      in = in == "/.." ? "/" : in.substr(3);
      const std::size_t last = out.rfind('/');
      out.erase(last == std::string::npos ? 0 : last);
    } else if (in == "." || in == "..") {
      in.clear();
    } else {
      const std::size_t next = in.find('/', in[0] == '/' ? 1 : 0);
      out += in.substr(0, next);
      in.erase(0, next == std::string::npos ? in.size() : next);
    }
  }
  return out;
}

std::string without_fragment(const std::string& uri) { return uri.substr(0, uri.find('#')); }

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key)
    out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : c == '%' ? "%25" : std::string(1, c);
  return out;
}

// Keywords whose values are data, not schemas: a "$ref" or "$id" inside them means nothing.
bool data_keyword(std::string_view key) {
  return key == "enum" || key == "const" || key == "default" || key == "examples" || key == "example";
}

// Keywords whose values map names (of properties, patterns, definitions) to schemas.
bool name_map(std::string_view key) {
  return key == "properties" || key == "patternProperties" || key == "definitions" || key == "$defs" ||
         key == "dependentSchemas" || key == "dependencies";
}

// Which keyword sets a base URI in a document, by its $schema: draft-03/04 `id` only; draft-06
// and 07 `$id`, ignored beside `$ref` (whose siblings those drafts ignore); 2019-09 and later
// `$id` anywhere. A document that does not say is read as draft-07.
enum class Ids { draft04, draft07, modern };

Ids ids_of(const JsonValue& doc) {
  const JsonValue* s = doc.type == Type::object ? doc.find("$schema") : nullptr;
  if (!s || s->type != Type::string) return Ids::draft07;
  if (s->text.find("draft-04") != std::string::npos || s->text.find("draft-03") != std::string::npos)
    return Ids::draft04;
  if (s->text.find("2019-09") != std::string::npos || s->text.find("2020-12") != std::string::npos) return Ids::modern;
  return Ids::draft07;
}

class Bundler {
 public:
  Bundler(JsonValue& root, const SchemaResolver& resolver) : root_(root), resolver_(resolver) {}

  void run() {
    index(root_, "", "", ids_of(root_), true);
    for (std::size_t i = 0; i < refs_.size(); ++i) fetch(refs_[i]);
    if (documents_.empty() && !embedded_) {  // nothing a local pointer cannot already say
      for (const Ref& r : refs_)
        if (missing_.count(without_fragment(r.target))) r.text->text = r.target;  // named absolutely
      return;
    }
    for (const Ref& r : refs_) rewrite(r);
    JsonValue docs;
    docs.type = Type::array;
    for (JsonValue& d : documents_) docs.items.push_back(std::move(d));
    if (!docs.items.empty()) root_.members.push_back({"x-ember-documents", std::move(docs)});
  }

 private:
  struct Ref {
    JsonValue* text;     // the $ref's string value, rewritten in place
    std::string target;  // absolute (or, without any base, relative) URI with its fragment
    std::string where;   // JSON pointer of the schema holding it, for messages
  };

  // `s` sits at `pointer` in the bundle with base URI `base`; `ids` is its document's draft.
  // `names`: `s` maps names to schemas (name_map), so "default" or "enum" in it names a property.
  void index(JsonValue& s, std::string base, const std::string& pointer, Ids ids, bool resource, bool names = false) {
    if (s.type == Type::array) {
      for (std::size_t i = 0; i < s.items.size(); ++i)
        index(s.items[i], base, pointer + "/" + std::to_string(i), ids, false);
      return;
    }
    if (s.type != Type::object) return;
    if (names) {
      for (JsonMember& m : s.members) index(m.second, base, pointer + "/" + pointer_token(m.first), ids, false);
      return;
    }
    const JsonValue* id = ids == Ids::draft04 ? nullptr : s.find("$id");
    if (id && ids == Ids::draft07 && s.find("$ref")) id = nullptr;
    if (!id && (ids == Ids::draft04 || resource)) id = s.find("id");  // a root's `id` is its base in any draft
    if (id && id->type == Type::string && !id->text.empty()) {
      if (id->text[0] == '#') {  // draft-06/07 plain-name fragment: an anchor
        anchors_.emplace(base + id->text, pointer);
      } else {
        const std::string uri = resolve_uri(base, id->text);
        const std::string doc = without_fragment(uri);
        if (uri.size() > doc.size() + 1) anchors_.emplace(uri, pointer);
        if (!resource && doc != base) embedded_ = true;
        base = doc;
        resources_.emplace(base, pointer);
      }
    }
    if (resource) resources_.emplace(base, pointer);
    for (const char* key : {"$anchor", "$dynamicAnchor"})
      if (const JsonValue* a = s.find(key); a && a->type == Type::string)
        anchors_.emplace(base + "#" + a->text, pointer);
    for (JsonMember& m : s.members) {
      if (data_keyword(m.first)) continue;
      if (m.first == "$ref" && m.second.type == Type::string) {
        refs_.push_back({&m.second, resolve_uri(base, m.second.text), pointer.empty() ? "/" : pointer});
        continue;
      }
      index(m.second, base, pointer + "/" + pointer_token(m.first), ids, false, name_map(m.first));
    }
  }

  // A document the resolver does not have is not an error here: a $ref that the schema never
  // reaches (an unused definition) must not refuse it. Its $ref is refused when reached.
  void fetch(const Ref& ref) {
    const std::string doc = without_fragment(ref.target);
    if (resources_.count(doc) || missing_.count(doc)) return;
    if (documents_.size() >= static_cast<std::size_t>(kMaxDocuments))
      fail(ErrorCode::invalid_argument, "json_schema: the $refs at {} need more than {} other documents", ref.where,
           kMaxDocuments);
    const std::optional<std::string> text = resolver_ ? resolver_(doc) : std::nullopt;
    if (!text) {
      missing_.insert(doc);
      return;
    }
    documents_.push_back(parse_json(*text, doc));
    const std::string pointer = "/x-ember-documents/" + std::to_string(documents_.size() - 1);
    resources_.emplace(doc, pointer);
    index(documents_.back(), doc, pointer, ids_of(documents_.back()), true);
  }

  void rewrite(const Ref& ref) {
    const std::string doc = without_fragment(ref.target);
    const std::string fragment = ref.target.size() > doc.size() ? ref.target.substr(doc.size() + 1) : "";
    const auto found = resources_.find(doc);
    if (found == resources_.end()) {  // not available: named absolutely when reached
      ref.text->text = ref.target;
      return;
    }
    const std::string& at = found->second;
    if (fragment.empty() || fragment[0] == '/') {
      // A pointer its resource lacks but the root has: read from the root, as schemas bundled
      // by tools that ignore embedded $ids expect (and as ember did before it honoured them).
      const bool root_instead = !at.empty() && !pointed("#" + at + fragment) && pointed("#" + fragment);
      ref.text->text = "#" + (root_instead ? "" : at) + fragment;
    } else if (const auto it = anchors_.find(ref.target); it != anchors_.end()) {
      ref.text->text = "#" + it->second;
    }  // else an unknown anchor: left as written, refused as pointing at nothing
  }

  // Whether a local pointer of the bundle names something (its documents are not appended yet).
  bool pointed(const std::string& ref) const {
    const std::string docs = "#/x-ember-documents/";
    if (ref.rfind(docs, 0) != 0) return resolve_pointer(root_, ref) != nullptr;
    const std::size_t slash = ref.find('/', docs.size());
    const std::size_t n = std::stoul(ref.substr(docs.size(), slash - docs.size()));
    std::string inside = "#";
    if (slash != std::string::npos) inside.append(ref, slash, std::string::npos);
    return resolve_pointer(documents_[n], inside) != nullptr;
  }

  JsonValue& root_;
  const SchemaResolver& resolver_;
  std::map<std::string, std::string> resources_;  // document URI -> its JSON pointer in the bundle
  std::map<std::string, std::string> anchors_;    // "URI#name" -> JSON pointer
  std::set<std::string> missing_;                 // documents the resolver does not have
  std::vector<Ref> refs_;
  std::deque<JsonValue> documents_;  // a deque: refs_ point into them while more are added
  bool embedded_ = false;            // a subschema with an $id of its own
};

}  // namespace

std::string resolve_uri(std::string_view base_text, std::string_view ref_text) {
  const Uri r = parse_uri(ref_text);
  if (r.has_scheme) {
    Uri t = r;
    t.path = remove_dot_segments(t.path);
    return compose(t);
  }
  const Uri b = parse_uri(base_text);
  Uri t;
  t.has_scheme = b.has_scheme, t.scheme = b.scheme;
  t.has_fragment = r.has_fragment, t.fragment = r.fragment;
  if (r.has_authority) {
    t.has_authority = true, t.authority = r.authority;
    t.path = remove_dot_segments(r.path);
    t.has_query = r.has_query, t.query = r.query;
    return compose(t);
  }
  t.has_authority = b.has_authority, t.authority = b.authority;
  if (r.path.empty()) {
    t.path = b.path;
    t.has_query = r.has_query || b.has_query, t.query = r.has_query ? r.query : b.query;
  } else {
    if (r.path[0] == '/') {
      t.path = remove_dot_segments(r.path);
    } else {
      const std::size_t slash = b.path.rfind('/');
      const std::string merged = b.has_authority && b.path.empty()
                                     ? "/" + r.path
                                     : (slash == std::string::npos ? "" : b.path.substr(0, slash + 1)) + r.path;
      t.path = remove_dot_segments(merged);
    }
    t.has_query = r.has_query, t.query = r.query;
  }
  return compose(t);
}

void bundle_schema(JsonValue& root, const SchemaResolver& resolver) { Bundler(root, resolver).run(); }

// The normaliser's side of $refs (schema_normalize.hpp): what a bundled $ref names.
void SchemaNormalizer::find_anchors(const JsonValue& s) {
  if (s.type == Type::object) {
    if (const JsonValue* a = s.find("$anchor"); a && a->type == Type::string) anchors_.emplace(a->text, &s);
    if (const JsonValue* id = s.find("$id"); id && id->type == Type::string && !id->text.empty() && id->text[0] == '#')
      anchors_.emplace(id->text.substr(1), &s);
    if (const JsonValue* id = s.find("id"); id && id->type == Type::string && !id->text.empty() && id->text[0] == '#')
      anchors_.emplace(id->text.substr(1), &s);
    for (const auto& m : s.members) find_anchors(m.second);
  } else if (s.type == Type::array) {
    for (const JsonValue& v : s.items) find_anchors(v);
  }
}

const JsonValue* SchemaNormalizer::resolve(const std::string& ref_in, const std::string& path, std::string* last) {
  std::string ref = ref_in;
  // The root's own $id (or draft-04 id) in front of the fragment names this document.
  for (const char* key : {"$id", "id"})
    if (const JsonValue* id = root_.find(key); id && id->type == Type::string && !id->text.empty()) {
      std::string base = id->text;
      if (!base.empty() && base.back() == '#') base.pop_back();
      if (ref.rfind(base, 0) == 0) ref = ref.substr(base.size());
    }
  if (ref.empty()) ref = "#";
  if (ref[0] != '#') {  // a document nobody supplied (schema_bundle.hpp)
    const std::string what = fmt::format("the remote $ref \"{}\" at {}", ref_in, path.empty() ? "/" : path);
    if (negating_ > 0) fail(ErrorCode::invalid_argument, "json_schema: {} is not available{}", what, kFetchesNothing);
    // Nothing is known to satisfy it, so it is read as false: what needs it is never generated
    // (narrower, never looser). Where every value needs it, SchemaConverter::run refuses.
    if (unavailable_.empty()) unavailable_ = what;
    notes_.add(what + " is not available: what needs it is never generated");
    static const JsonValue never = json_bool(false);
    return &never;
  }
  std::string decoded;  // %XX escapes of the URI fragment
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] == '%' && i + 2 < ref.size() && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
      decoded += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += ref[i];
    }
  }
  if (decoded.size() > 1 && decoded[1] != '/') {
    if (!anchors_found_) find_anchors(root_), anchors_found_ = true;
    if (last) *last = decoded.substr(1);
    const auto it = anchors_.find(decoded.substr(1));
    return it == anchors_.end() ? nullptr : it->second;
  }
  return resolve_pointer(root_, decoded, last);
}

}  // namespace ember::grammar
