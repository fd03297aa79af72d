#include "grammar/schema_normalize.hpp"

#include "grammar/schema_numbers.hpp"
#include "grammar/schema_overlap.hpp"
#include "grammar/schema_regex.hpp"
#include "util/check.hpp"

namespace ember::grammar {
namespace {

using Type = JsonValue::Type;

// The keywords the converter enforces (x-ember-not is the normaliser's own).
const std::set<std::string, std::less<>> kFlatKeywords = {"type",
                                                          "enum",
                                                          "const",
                                                          "properties",
                                                          "required",
                                                          "additionalProperties",
                                                          "patternProperties",
                                                          "propertyNames",
                                                          "minProperties",
                                                          "maxProperties",
                                                          "items",
                                                          "prefixItems",
                                                          "minItems",
                                                          "maxItems",
                                                          "uniqueItems",
                                                          "contains",
                                                          "minLength",
                                                          "maxLength",
                                                          "pattern",
                                                          "format",
                                                          "minimum",
                                                          "maximum",
                                                          "exclusiveMinimum",
                                                          "exclusiveMaximum",
                                                          "multipleOf",
                                                          "x-ember-not"};
// Validation keywords the normaliser rewrites into the ones above.
const std::set<std::string, std::less<>> kCombinators = {"allOf",
                                                         "anyOf",
                                                         "oneOf",
                                                         "$ref",
                                                         "if",
                                                         "then",
                                                         "else",
                                                         "not",
                                                         "dependencies",
                                                         "dependentRequired",
                                                         "dependentSchemas",
                                                         "additionalItems"};
// Keywords that assert something ember does not enforce: dropped with a note.
const std::set<std::string, std::less<>> kUnenforced = {"minContains",      "maxContains", "unevaluatedProperties",
                                                        "unevaluatedItems", "$dynamicRef", "$recursiveRef"};

struct Count {  // one more for the scope's life
  int& n;
  explicit Count(int& c) : n(++c) {}
  ~Count() { --n; }
};

JsonValue make_object() {
  JsonValue v;
  v.type = Type::object;
  return v;
}
JsonValue make_string(const std::string& s) {
  JsonValue v;
  v.type = Type::string;
  v.text = s;
  return v;
}
JsonValue make_array(std::vector<JsonValue> items) {
  JsonValue v;
  v.type = Type::array;
  v.items = std::move(items);
  return v;
}
void set(JsonValue& o, const std::string& key, JsonValue value) {
  for (auto& m : o.members)
    if (m.first == key) {
      m.second = std::move(value);
      return;
    }
  o.members.push_back({key, std::move(value)});
}
void erase(JsonValue& o, std::string_view key) {
  std::erase_if(o.members, [&](const JsonMember& m) { return m.first == key; });
}
JsonValue any_of(std::vector<JsonValue> branches) {
  JsonValue v = make_object();
  set(v, "anyOf", make_array(std::move(branches)));
  return v;
}
JsonValue all_of(JsonValue a, JsonValue b) {
  JsonValue v = make_object();
  set(v, "allOf", make_array({std::move(a), std::move(b)}));
  return v;
}
bool is_false(const JsonValue& v) { return v.type == Type::boolean && !v.boolean; }
// anyOf of the branches, nested unions flattened and false ones left out.
JsonValue union_of(std::vector<JsonValue> branches) {
  std::vector<JsonValue> out;
  for (JsonValue& b : branches) {
    if (is_false(b)) continue;
    if (const JsonValue* inner = b.type == Type::object ? b.find("anyOf") : nullptr)
      for (const JsonValue& x : inner->items) out.push_back(x);
    else
      out.push_back(std::move(b));
  }
  if (out.empty()) return json_bool(false);
  if (out.size() == 1) return std::move(out[0]);
  return any_of(std::move(out));
}
bool is_true(const JsonValue& v) {
  return (v.type == Type::boolean && v.boolean) || (v.type == Type::object && v.members.empty());
}

// The type names of a flat schema's "type" (empty: any).
std::vector<std::string> types_of(const JsonValue& s) {
  std::vector<std::string> out;
  if (const JsonValue* t = s.find("type")) {
    if (t->type == Type::string) out.push_back(t->text);
    for (const JsonValue& v : t->items)
      if (v.type == Type::string) out.push_back(v.text);
  }
  return out;
}
JsonValue type_value(const std::vector<std::string>& types) {
  if (types.size() == 1) return make_string(types[0]);
  std::vector<JsonValue> items;
  for (const std::string& t : types) items.push_back(make_string(t));
  return make_array(std::move(items));
}
std::vector<std::string> intersect_types(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  const auto has = [](const std::vector<std::string>& v, const char* t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  for (const std::string& t : a) {
    if (std::find(b.begin(), b.end(), t) != b.end())
      out.push_back(t);
    else if (t == "integer" && has(b, "number"))
      out.push_back(t);
    else if (t == "number" && has(b, "integer"))
      out.push_back("integer");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// enum or const as a list of values.
std::optional<std::vector<JsonValue>> values_of(const JsonValue& s) {
  if (const JsonValue* c = s.find("const")) return std::vector<JsonValue>{*c};
  if (const JsonValue* e = s.find("enum"); e && e->type == Type::array) return e->items;
  return std::nullopt;
}

bool lower_key(std::string_view k) {
  return k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" || k == "minProperties";
}
bool upper_key(std::string_view k) {
  return k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties";
}

// The tighter of two bounds of the same keyword (by value; both numbers).
const JsonValue& tighter(std::string_view key, const JsonValue& a, const JsonValue& b) {
  const auto x = parse_decimal(a.text), y = parse_decimal(b.text);
  if (!x || !y) return a;
  const int c = compare(*x, *y);
  return lower_key(key) ? (c >= 0 ? a : b) : (c <= 0 ? a : b);
}

}  // namespace

const SchemaNormalizer::Normalized& SchemaNormalizer::normalize_once(const JsonValue& s, const std::string& path) {
  if (in_root_.empty()) {
    const auto walk = [&](const auto& self, const JsonValue& v) -> void {
      in_root_.insert(&v);
      for (const JsonValue& x : v.items) self(self, x);
      for (const JsonMember& m : v.members) self(self, m.second);
    };
    walk(walk, root_);
  }
  // A value made while converting (a merge's allOf) may reuse a freed address: not cached.
  const bool cacheable = in_root_.count(&s) > 0;
  if (cacheable)
    if (auto it = cache_.find(&s); it != cache_.end()) return it->second;
  inlined.clear();
  Normalized n{normalize(s, path), std::move(inlined)};
  inlined.clear();
  if (!cacheable) {
    scratch_.push_back(std::move(n));
    return scratch_.back();
  }
  return cache_.emplace(&s, std::move(n)).first->second;
}

JsonValue SchemaNormalizer::normalize(const JsonValue& s, const std::string& path) {
  if (++steps_ > kMaxSteps)
    fail(ErrorCode::invalid_argument,
         "json_schema: resolving the schema's $refs and combinations takes more than {} steps (at {}); it is "
         "too large to enforce",
         kMaxSteps, path.empty() ? "/" : path);
  if (++depth_ > 200)
    fail(ErrorCode::invalid_argument, "json_schema: a schema nested deeper than 200 at {} is not supported",
         path.empty() ? "/" : path);
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  if (s.type == Type::boolean) return s;
  if (s.type != Type::object)
    fail(ErrorCode::invalid_argument, "json_schema: a schema must be an object or a boolean at {}",
         path.empty() ? "/" : path);
  const std::string at = path.empty() ? "/" : path;
  JsonValue base = make_object();
  for (const auto& [key, value] : s.members) {
    if (key == "items" && value.type == Type::array)
      set(base, "prefixItems", value);
    else if (kFlatKeywords.count(key))
      set(base, key, value);
    else if (kUnenforced.count(key))
      notes_.add(fmt::format("'{}' at {} is not enforced", key, at));
  }
  if (const JsonValue* items = s.find("items"); items && items->type == Type::array)
    if (const JsonValue* extra = s.find("additionalItems")) set(base, "items", *extra);
  // Draft-04: exclusiveMinimum/Maximum true make minimum/maximum exclusive.
  for (const auto& [flag, bound] : {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}})
    if (const JsonValue* f = base.find(flag); f && f->type == Type::boolean) {
      const bool exclusive = f->boolean;
      erase(base, flag);
      if (const JsonValue* b = base.find(bound); b && exclusive) {
        set(base, flag, *b);
        erase(base, bound);
      }
    }

  std::vector<JsonValue> parts;
  if (const JsonValue* ref = s.find("$ref")) {
    if (ref->type != Type::string) fail(ErrorCode::invalid_argument, "json_schema: '$ref' must be a string at {}", at);
    JsonValue r = make_object();
    set(r, "$ref", *ref);
    parts.push_back(std::move(r));
  }
  if (const JsonValue* all = s.find("allOf")) {
    if (all->type != Type::array) fail(ErrorCode::invalid_argument, "json_schema: 'allOf' must be an array at {}", at);
    for (std::size_t i = 0; i < all->items.size(); ++i)
      parts.push_back(normalize(all->items[i], fmt::format("{}/allOf/{}", path, i)));
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (const JsonValue* list = s.find(key)) {
      if (list->type != Type::array || list->items.empty())
        fail(ErrorCode::invalid_argument, "json_schema: '{}' must be a non-empty array at {}", key, at);
      // "Exactly one of these names present": disjoint branches (schema_overlap.hpp).
      const std::optional<JsonValue> exclusive =
          std::string_view(key) == "oneOf" ? exclusive_required(*list) : std::nullopt;
      if (exclusive) list = &*exclusive;
      if (std::string_view(key) == "oneOf" && !exclusive)
        for (std::size_t i = 0; i < list->items.size(); ++i)
          for (std::size_t j = i + 1; j < list->items.size(); ++j)
            if (may_overlap(list->items[i], list->items[j], root_)) {
              notes_.add(fmt::format("'oneOf' at {}: branches {} and {} may both match a value; generated as anyOf", at,
                                     i, j));
              i = j = list->items.size();
            }
      std::vector<JsonValue> branches;
      for (std::size_t i = 0; i < list->items.size(); ++i)
        branches.push_back(normalize(list->items[i], fmt::format("{}/{}/{}", path, key, i)));
      parts.push_back(union_of(std::move(branches)));
    }
  std::vector<std::pair<JsonValue, std::string>> optional_parts;  // narrowing that may be dropped
  if (s.find("if")) {
    std::string dropped;
    JsonValue c = conditional(s, path);
    if (const JsonValue* note = c.find("x-ember-forced-if")) {
      dropped = fmt::format("'if' at {}: its 'else' is not enforced", at);
      JsonValue inner = note->items[0];
      optional_parts.emplace_back(std::move(inner), dropped);
    } else {
      parts.push_back(std::move(c));
    }
  }
  if (const JsonValue* n = s.find("not")) {
    const Count negating{negating_};
    if (auto neg = negate(normalize(*n, path + "/not"), path))
      parts.push_back(std::move(*neg));
    else
      notes_.add(fmt::format("'not' at {} is not enforced", at));
  }
  JsonValue required_deps = make_object(), schema_deps = make_object();
  if (const JsonValue* d = s.find("dependencies"); d && d->type == Type::object)
    for (const auto& [name, dep] : d->members) set(dep.type == Type::array ? required_deps : schema_deps, name, dep);
  if (const JsonValue* d = s.find("dependentRequired"); d && d->type == Type::object)
    for (const auto& [name, dep] : d->members) set(required_deps, name, dep);
  if (const JsonValue* d = s.find("dependentSchemas"); d && d->type == Type::object)
    for (const auto& [name, dep] : d->members) set(schema_deps, name, dep);
  const auto absent = [](const std::string& name) {
    JsonValue props = make_object(), v = make_object();
    set(props, name, json_bool(false));
    set(v, "properties", std::move(props));
    return v;
  };
  for (const auto& [name, list] : required_deps.members) {
    JsonValue present = make_object();
    std::vector<JsonValue> names{make_string(name)};
    for (const JsonValue& n : list.items) names.push_back(n);
    set(present, "required", make_array(std::move(names)));
    parts.push_back(union_of({absent(name), std::move(present)}));
  }
  for (const auto& [name, dep] : schema_deps.members) {
    JsonValue present = make_object();
    set(present, "required", make_array({make_string(name)}));
    JsonValue needs = conj(present, normalize(dep, path + "/dependentSchemas/" + name), path);
    parts.push_back(union_of({absent(name), std::move(needs)}));
  }
  if (parts.empty() && optional_parts.empty()) return base;
  JsonValue out = std::move(base);
  for (const JsonValue& p : parts) out = conj(out, p, path);
  for (auto& [p, note] : optional_parts) {
    JsonValue narrowed = conj(out, p, path);
    if (is_false(narrowed))
      notes_.add(note);
    else
      out = std::move(narrowed);
  }
  return out;
}

JsonValue SchemaNormalizer::conditional(const JsonValue& s, const std::string& path) {
  const JsonValue cond = [&] {
    const Count negating{negating_};  // `if` is read both ways
    return normalize(*s.find("if"), path + "/if");
  }();
  const JsonValue then = s.find("then") ? normalize(*s.find("then"), path + "/then") : json_bool(true);
  const JsonValue other = s.find("else") ? normalize(*s.find("else"), path + "/else") : json_bool(true);
  JsonValue when = conj(cond, then, path);
  if (auto neg = negate(cond, path)) {
    JsonValue otherwise = conj(*neg, other, path);
    return union_of({std::move(when), std::move(otherwise)});
  }
  if (is_true(then)) return json_bool(true);  // if without then: nothing to enforce
  // not-if cannot be written: generate the then side only (narrower), unless that is impossible.
  JsonValue marked = make_object();
  set(marked, "x-ember-forced-if", make_array({std::move(when)}));
  return marked;
}

JsonValue SchemaNormalizer::inline_ref(const JsonValue& ref_schema, const std::string& path) {
  const std::string ref = ref_schema.find("$ref")->text;
  if (inlining_.count(ref))
    fail(ErrorCode::invalid_argument,
         "json_schema: the $ref \"{}\" at {} refers back to itself with no value in between", ref,
         path.empty() ? "/" : path);
  const JsonValue* target = resolve(ref, path);
  if (!target)
    fail(ErrorCode::invalid_argument, "json_schema: the $ref \"{}\" points at nothing at {}", ref,
         path.empty() ? "/" : path);
  inlining_.insert(ref);
  inlined.push_back(ref);
  ++inline_count_;
  JsonValue out = normalize(*target, path);
  inlining_.erase(ref);
  return out;
}

JsonValue SchemaNormalizer::conj(const JsonValue& a, const JsonValue& b, const std::string& path) {
  if (is_false(a) || is_false(b)) return json_bool(false);
  if (is_true(a)) return b;
  if (is_true(b)) return a;
  // A $ref already being inlined stays an allOf, merged when the converter visits it (its
  // recursion is unrolled there like any other).
  for (const JsonValue* r : {a.find("$ref"), b.find("$ref")})
    if (r && inlining_.count(r->text)) return all_of(a, b);
  if (a.find("$ref")) return conj(inline_ref(a, path), b, path);
  if (b.find("$ref")) return conj(a, inline_ref(b, path), path);
  const JsonValue* ua = a.find("anyOf");
  const JsonValue* ub = b.find("anyOf");
  if (ua || ub) {
    const std::vector<JsonValue> xs = ua ? ua->items : std::vector<JsonValue>{a};
    const std::vector<JsonValue> ys = ub ? ub->items : std::vector<JsonValue>{b};
    std::vector<JsonValue> out;
    // Past kMaxBranches combinations the rest are left out: narrower, never looser.
    for (const JsonValue& x : xs)
      for (const JsonValue& y : ys)
        if (out.size() < kMaxBranches) out.push_back(conj(x, y, path));
    return union_of(std::move(out));
  }
  return merge_flat(a, b, path);
}

JsonValue SchemaNormalizer::merge_flat(const JsonValue& a, const JsonValue& b, const std::string& path) {
  const std::string at = path.empty() ? "/" : path;
  JsonValue out = a;
  erase(out, "properties");
  for (const auto& [key, vb] : b.members) {
    const JsonValue* va = a.find(key);
    if (key == "properties" || key == "enum" || key == "const") continue;
    if (!va) {
      set(out, key, vb);
    } else if (key == "type") {
      const std::vector<std::string> t = intersect_types(types_of(a), types_of(b));
      if (t.empty()) return json_bool(false);
      set(out, key, type_value(t));
    } else if (key == "required") {
      JsonValue r = *va;
      for (const JsonValue& n : vb.items)
        if (std::none_of(r.items.begin(), r.items.end(), [&](const JsonValue& x) { return x.text == n.text; }))
          r.items.push_back(n);
      set(out, key, std::move(r));
    } else if (lower_key(key) || upper_key(key)) {
      set(out, key, tighter(key, *va, vb));
    } else if (key == "items" || key == "additionalProperties" || key == "propertyNames" || key == "contains") {
      set(out, key, all_of(*va, vb));
    } else if (key == "uniqueItems") {
      set(out, key, json_bool(va->boolean || vb.boolean));
    } else if (key == "prefixItems" || key == "patternProperties") {
      JsonValue m = *va;
      for (std::size_t i = 0; i < vb.items.size(); ++i)  // arrays: position by position
        if (i < m.items.size())
          m.items[i] = all_of(m.items[i], vb.items[i]);
        else
          m.items.push_back(vb.items[i]);
      for (const auto& [k, v] : vb.members) {  // objects: pattern by pattern
        const JsonValue* mine = m.find(k);
        set(m, k, mine ? all_of(*mine, v) : v);
      }
      set(out, key, std::move(m));
    } else if (key == "x-ember-not") {
      JsonValue m = *va;
      m.items.insert(m.items.end(), vb.items.begin(), vb.items.end());
      set(out, key, std::move(m));
    } else if (va->dump() != vb.dump()) {
      notes_.add(fmt::format("'{}' at {}: two different values meet in allOf; only the first is enforced", key, at));
    }
  }
  // enum/const: the values both allow.
  const auto xa = values_of(a), xb = values_of(b);
  if (xa || xb) {
    std::vector<JsonValue> values;
    if (xa && xb) {
      for (const JsonValue& v : *xa)
        if (std::any_of(xb->begin(), xb->end(), [&](const JsonValue& w) { return w.dump() == v.dump(); }))
          values.push_back(v);
      if (values.empty()) return json_bool(false);
    } else {
      values = xa ? *xa : *xb;
    }
    if (const JsonValue* no = out.find("x-ember-not"))
      std::erase_if(values, [&](const JsonValue& v) {
        return std::any_of(no->items.begin(), no->items.end(),
                           [&](const JsonValue& x) { return x.dump() == v.dump(); });
      });
    if (const std::vector<std::string> t = types_of(out); !t.empty())
      std::erase_if(values, [&](const JsonValue& v) {
        static const char* names[] = {"null", "boolean", "number", "string", "array", "object"};
        const std::string vt = names[static_cast<int>(v.type)];
        const auto has = [&](const char* x) { return std::find(t.begin(), t.end(), x) != t.end(); };
        return !(has(vt.c_str()) || (vt == "number" && has("integer") && v.is_integer()));
      });
    if (values.empty()) return json_bool(false);
    erase(out, "const");
    set(out, "enum", make_array(std::move(values)));
  }
  // properties by name; one side's property the other does not list must also satisfy the
  // other's patternProperties schemas it matches, or its additionalProperties if none.
  const JsonValue* pa = a.find("properties");
  const JsonValue* pb = b.find("properties");
  const auto extra_of = [&](const JsonValue& side, const std::string& name) -> std::optional<JsonValue> {
    std::optional<JsonValue> matched;
    if (const JsonValue* pp = side.find("patternProperties"); pp && pp->type == Type::object)
      for (const auto& [pattern, schema] : pp->members) {
        const std::optional<bool> m = pattern_matches(pattern, name);
        if (!m) {
          notes_.add(fmt::format(
              "'additionalProperties' at {}: whether '{}' matches a patternProperties pattern is not checked", at,
              name));
          return std::nullopt;
        }
        if (*m && !is_true(schema)) matched = matched ? all_of(*matched, schema) : schema;
        if (*m && !matched) matched = json_bool(true);
      }
    if (matched) return is_true(*matched) ? std::nullopt : matched;
    const JsonValue* ap = side.find("additionalProperties");
    if (!ap || is_true(*ap)) return std::nullopt;
    return *ap;
  };
  // Merged at once (not left as allOf), so that a property no value satisfies shows here.
  // Only one level deep, and a $ref stays as it is: merging two recursive schemas at once
  // would not end (deeper levels merge when the converter visits them).
  const auto both = [&](const JsonValue& x, const JsonValue& y, const std::string& name) {
    if (eager_ || (x.type == Type::object && x.find("$ref")) || (y.type == Type::object && y.find("$ref")))
      return all_of(x, y);
    struct Enter {
      int& e;
      ~Enter() { --e; }
    } enter{++eager_};
    JsonValue nx = normalize(x, path + "/properties/" + name), ny = normalize(y, path + "/properties/" + name);
    if (nx.find("$ref") || ny.find("$ref")) return all_of(std::move(nx), std::move(ny));
    return conj(nx, ny, path);
  };
  JsonValue props = make_object();
  if (pa)
    for (const auto& [name, v] : pa->members) {
      const JsonValue* w = pb ? pb->find(name) : nullptr;
      if (w)
        set(props, name, both(v, *w, name));
      else if (auto e = extra_of(b, name))
        set(props, name, both(v, *e, name));
      else
        set(props, name, v);
    }
  if (pb)
    for (const auto& [name, w] : pb->members) {
      if (pa && pa->find(name)) continue;
      if (auto e = extra_of(a, name))
        set(props, name, both(w, *e, name));
      else
        set(props, name, w);
    }
  if (!props.members.empty()) set(out, "properties", props);
  if (const JsonValue* r = out.find("required"))
    for (const JsonValue& n : r->items)
      if (const JsonValue* p = props.find(n.text); p && is_false(*p)) return json_bool(false);
  return out;
}

std::optional<JsonValue> SchemaNormalizer::negate(const JsonValue& s, const std::string& path, int depth) {
  static const std::vector<std::string> kAllTypes = {"null", "boolean", "object", "array", "number", "string"};
  const Count negating{negating_};
  if (depth > 8) return std::nullopt;
  if (s.type == Type::boolean) return json_bool(!s.boolean);
  if (s.members.empty()) return json_bool(false);
  if (s.find("$ref")) return negate(inline_ref(s, path), path, depth + 1);
  if (const JsonValue* u = s.find("anyOf")) {  // not (A or B) = not A and not B
    JsonValue out = json_bool(true);
    for (const JsonValue& b : u->items) {
      auto n = negate(b, path, depth + 1);
      if (!n) return std::nullopt;
      out = conj(out, *n, path);
    }
    return out;
  }
  const std::vector<std::string> types = types_of(s);
  // The types `s` does not allow (a non-integer number is left out: narrower).
  const auto other_types = [&] {
    std::vector<std::string> out;
    for (const std::string& t : kAllTypes) {
      const bool numeric = t == "number" && std::find(types.begin(), types.end(), "integer") != types.end();
      if (std::find(types.begin(), types.end(), t) == types.end() && !numeric) out.push_back(t);
    }
    return out;
  };
  const auto only = [&](std::initializer_list<std::string_view> keys) {
    return std::all_of(s.members.begin(), s.members.end(),
                       [&](const JsonMember& m) { return std::find(keys.begin(), keys.end(), m.first) != keys.end(); });
  };
  std::vector<JsonValue> branches;
  const auto not_types = [&] {
    if (types.empty()) return;
    const std::vector<std::string> rest = other_types();
    if (rest.empty()) return;
    JsonValue v = make_object();
    set(v, "type", type_value(rest));
    branches.push_back(std::move(v));
  };
  if (only({"type"})) {
    not_types();
    return union_of(std::move(branches));
  }
  if (only({"x-ember-not"})) {
    JsonValue v = make_object();
    set(v, "enum", *s.find("x-ember-not"));
    return v;
  }
  if (only({"type", "enum", "const"})) {
    not_types();
    JsonValue v = make_object();
    set(v, "x-ember-not", make_array(*values_of(s)));
    branches.push_back(std::move(v));
    return union_of(std::move(branches));
  }
  if (only({"type", "properties", "required"}) && (types.empty() || (types.size() == 1 && types[0] == "object"))) {
    not_types();
    const auto object_with = [&](const std::string& name, JsonValue value, bool required) {
      JsonValue props = make_object(), v = make_object();
      set(props, name, std::move(value));
      set(v, "type", make_string("object"));
      set(v, "properties", std::move(props));
      if (required) set(v, "required", make_array({make_string(name)}));
      return v;
    };
    if (const JsonValue* r = s.find("required"))
      for (const JsonValue& n : r->items) branches.push_back(object_with(n.text, json_bool(false), false));
    if (const JsonValue* p = s.find("properties"))  // a branch that cannot be written is left out: narrower
      for (const auto& [name, v] : p->members)
        if (auto n = negate(normalize(v, path), path, depth + 1))
          branches.push_back(object_with(name, std::move(*n), true));
    if (branches.empty()) return std::nullopt;
    return union_of(std::move(branches));
  }
  return std::nullopt;
}

}  // namespace ember::grammar
