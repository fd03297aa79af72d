#!/usr/bin/env python3
"""Checks that docs/api.md mentions every public name of ember's public headers.

    check_api_docs.py [--root DIR] [--doc FILE] [--list]

The names are read from include/ember/ember.hpp (C++ API) and include/ember/ember.h (C ABI)
with a small brace-aware scanner over the comment-stripped text:

  ember.hpp  types (struct, class, enum class, using), enum values, public member functions
             and public fields (constructors, destructors and operators are the type itself),
             free functions; namespace ember::runtime is internal and skipped.
  ember.h    functions (ember_*, the static inline ones too), types (typedef'd enums, structs,
             opaque handles, callback types), enum constants, struct fields, #define macros.

A name counts as mentioned when it is written as an identifier in code: an inline `code span`
or a fenced block. Top-level names (types, functions, C enum constants, macros) may be anywhere
in the document. A member (a field, a member function, a value of a C++ enum, a field of a C
struct) must be written qualified (`Owner::member`, `Owner.member`, `Owner->member`), or appear
in code in the same section as its owner (a section runs from one heading to the next,
whatever their levels), so that `text` in the Chunk section does not count for
`Completion::text`.

Exit status: 0 when everything is documented, 1 listing every name that is not (or when the
headers could not be read or parsed), 2 for a bad command line.
"""

import argparse
import os
import re
import sys

# Names that are public in the headers' text but not API to document, with the reason.
ALLOWED = {
    "EMBER_EMBER_H": "the include guard of ember.h, not an API",
}

# Names the extraction must find: if it misses one, the scanner broke (say, a header's layout
# changed) and a pass would mean nothing.
CANARIES = [
    ("ember.hpp", "Engine", "generate"),
    ("ember.hpp", "SamplingParams", "seed"),
    ("ember.hpp", "ModelInfo", "kv_heads"),  # a field of a multi-declarator line
    ("ember.hpp", "ErrorCode", "busy"),
    ("ember.hpp", None, "version"),
    ("ember.hpp", None, "StreamCallback"),
    ("ember.h", None, "ember_engine_open"),
    ("ember.h", None, "ember_sampling_default"),  # static inline
    ("ember.h", None, "ember_stream_fn"),
    ("ember.h", None, "EMBER_OK"),
    ("ember.h", None, "EMBER_VERSION_NUMBER"),
    ("ember.h", "ember_completion", "timings"),
]

IDENT = re.compile(r"[A-Za-z_]\w*")


class Name:
    def __init__(self, header, kind, name, owner=None):
        self.header, self.kind, self.name, self.owner = header, kind, name, owner

    def display(self):
        sep = "." if self.header == "ember.h" else "::"
        return self.owner + sep + self.name if self.owner else self.name


# ---- reading the headers ------------------------------------------------------------------------


def strip_comments(text):
    """Replaces comments by a space, keeping string literals (extern "C") intact."""
    pattern = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
    return pattern.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)


def is_function_head(head):
    """A declaration whose text before any '=' has a parameter list: a function."""
    return "(" in head.split("=", 1)[0]


def split_items(text):
    """Splits a scope's text into (head, body, tail) items. An item ends at a ';' outside
    parentheses and braces, or right after the block of a function or namespace; `body` is the
    text inside the item's first top-level braces (None without), `tail` what follows them."""
    items = []
    head, body, tail = [], None, []
    paren = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        cur = tail if body is not None else head
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        if c == "{" and paren == 0:
            depth, j = 1, i + 1
            while j < n and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if depth:
                raise ValueError("unbalanced braces")
            block = text[i + 1:j - 1]
            h = "".join(head)
            if body is None:
                body = block
                if re.match(r"\s*(namespace|extern)\b", h) or is_function_head(h):
                    items.append((h, body, ""))
                    head, body, tail = [], None, []
            else:  # a second block in one declaration (an initializer): part of the tail
                tail.append(text[i:j])
            i = j
            continue
        if c == ";" and paren == 0:
            items.append(("".join(head), body, "".join(tail)))
            head, body, tail = [], None, []
        else:
            cur.append(c)
        i += 1
    if "".join(head).strip():
        items.append(("".join(head), body, "".join(tail)))
    return items


def declarator_names(decl):
    """The names a field declaration declares: `int a = 0, b = 0` -> [a, b]."""
    prev = None
    while prev != decl:  # template arguments may hold commas
        prev, decl = decl, re.sub(r"<[^<>;]*>", " ", decl)
    names, depth, part = [], 0, []
    for c in decl + ",":
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            idents = IDENT.findall(re.split(r"[={]", "".join(part), 1)[0])
            if idents:
                names.append(idents[-1])
            part = []
        else:
            part.append(c)
    return names


def function_name(head):
    m = re.search(r"(\w+)\s*$", head.split("(", 1)[0])
    return m.group(1) if m else None


def parse_members(header, owner, body, public, out):
    """The public fields and member functions of a struct or class body."""
    for head, block, tail in split_items(body):
        while True:  # access labels end with ':' and prefix the next declaration
            m = re.match(r"\s*(public|private|protected)\s*:(?!:)", head)
            if not m:
                break
            public = m.group(1) == "public"
            head = head[m.end():]
        text = head.strip()
        if not text or not public:
            continue
        if re.match(r"(friend|static_assert|using|typedef)\b", text) or "operator" in text:
            continue
        if block is not None and re.match(r"(struct|class|enum|union)\b", text):
            raise ValueError(owner + ": nested types are not handled by this scanner")
        if is_function_head(text):
            name = function_name(text)
            if name and name != owner:  # constructors and destructors are the type itself
                out.append(Name(header, "member function", name, owner))
        else:
            for name in declarator_names(text + (" {" + block + "}" if block is not None else "") + tail):
                out.append(Name(header, "field", name, owner))


def parse_enum(header, owner, body, out, qualified):
    for part in body.split(","):
        m = IDENT.match(part.strip())
        if m:
            if qualified:  # a C++ enum class value: a member of its enum
                out.append(Name(header, "enum value", m.group(0), owner))
            else:  # a C enum constant: a global name
                out.append(Name(header, "enum constant", m.group(0)))


def parse_scope(header, text, out):
    for head, body, tail in split_items(text):
        h = " ".join(head.split())
        if not h:
            continue
        m = re.match(r"namespace\s+(\w+)", h)
        if m:
            if m.group(1) != "runtime":  # ember::runtime is internal (see ember.hpp)
                parse_scope(header, body, out)
            continue
        if h.startswith("extern"):
            parse_scope(header, body, out)
            continue
        if h.startswith("using"):
            m = re.match(r"using\s+(\w+)\s*=", h)
            if m:
                out.append(Name(header, "type alias", m.group(1)))
            continue
        m = re.match(r"(typedef\s+)?(enum(?:\s+class)?|struct|class|union)\s+(?:EMBER_API\s+)?(\w+)", h)
        if m and body is not None:
            owner = m.group(3)
            out.append(Name(header, "type", owner))
            typedef_names = IDENT.findall(tail)
            for alias in typedef_names:
                if alias != owner:
                    out.append(Name(header, "type", alias))
            if m.group(2).startswith("enum"):
                parse_enum(header, owner, body, out, qualified="class" in m.group(2))
            else:
                parse_members(header, owner, body, m.group(2) != "class", out)
            continue
        if h.startswith("typedef"):
            m = re.search(r"\(\s*\*\s*(\w+)\s*\)", h)  # a function pointer type
            out.append(Name(header, "type", m.group(1) if m else IDENT.findall(h)[-1]))
            continue
        if m:  # a forward declaration at namespace scope
            out.append(Name(header, "type", m.group(3)))
            continue
        if is_function_head(h):
            name = function_name(h)
            if name:
                out.append(Name(header, "function", name))
            continue
        raise ValueError("cannot classify the declaration: " + h[:80])


def read_header(path):
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        text = strip_comments(f.read())
    out = [Name(name, "macro", m) for m in re.findall(r"^\s*#\s*define\s+(\w+)", text, re.M)]
    text = re.sub(r"^\s*#\s*ifdef\s+__cplusplus\b.*?^\s*#\s*endif\b[^\n]*", " ", text, flags=re.S | re.M)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)  # #include, #pragma, guards
    parse_scope(name, text, out)
    return out


# ---- reading the document -----------------------------------------------------------------------


def read_doc(path):
    """The document's sections as (identifiers in code, code text), plus all code text."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    sections, code, prose, fenced = [], [], [], False

    def close_section():
        # Code spans may wrap lines; only fenced blocks are taken whole.
        code.extend(re.findall(r"`([^`]+)`", "\n".join(prose)))
        sections.append(list(code))
        del code[:], prose[:]

    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and re.match(r"#{1,6}\s", line):
            close_section()
        (code if fenced else prose).append(line)
    close_section()
    texts = ["\n".join(s) for s in sections]
    return [set(IDENT.findall(t)) for t in texts], "\n".join(texts)


def documented(name, sections, all_code):
    if name.owner is None:
        return any(name.name in s for s in sections)
    qualified = r"\b%s\s*(::|\.|->)\s*%s\b" % (re.escape(name.owner), re.escape(name.name))
    if re.search(qualified, all_code):
        return True
    return any(name.owner in s and name.name in s for s in sections)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")),
                        help="the ember source tree (default: this script's)")
    parser.add_argument("--doc", help="the document to check (default: ROOT/docs/api.md)")
    parser.add_argument("--list", action="store_true", help="print every extracted name")
    args = parser.parse_args()
    doc = args.doc or os.path.join(args.root, "docs", "api.md")
    headers = [os.path.join(args.root, "include", "ember", h) for h in ("ember.hpp", "ember.h")]

    try:
        names = [n for h in headers for n in read_header(h)]
        sections, all_code = read_doc(doc)
    except (OSError, ValueError) as e:
        print("check_api_docs: %s" % e)
        return 1

    found = {(n.header, n.owner, n.name) for n in names}
    broken = [c for c in CANARIES if c not in found]
    if broken:
        print("check_api_docs: the header scanner missed names it must find (fix the scanner):")
        for header, owner, name in broken:
            print("  %s: %s" % (header, owner + "::" + name if owner else name))
        return 1

    unique, seen = [], set()
    for n in names:
        key = (n.header, n.kind, n.owner, n.name)
        if key not in seen:
            seen.add(key)
            unique.append(n)
    if args.list:
        for n in unique:
            print("%-9s  %-15s  %s" % (n.header, n.kind, n.display()))

    missing = [n for n in unique if n.name not in ALLOWED and not documented(n, sections, all_code)]
    if missing:
        print("%s does not mention %d public name(s):" % (doc, len(missing)))
        for n in missing:
            print("  %-9s  %-15s  %s" % (n.header, n.kind, n.display()))
        print("A member counts when written Owner::member (or Owner.member) in code, or in code in")
        print("the same section as its owner. Document each one in docs/api.md; a name that is not")
        print("API goes into ALLOWED in %s, with the reason." % os.path.abspath(__file__))
        return 1
    per_header = {}
    for n in unique:
        per_header[n.header] = per_header.get(n.header, 0) + 1
    print("%s mentions all %d public names (%s; %d allowed undocumented)" % (
        doc, len(unique), ", ".join("%s: %d" % kv for kv in sorted(per_header.items())),
        sum(1 for n in unique if n.name in ALLOWED)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
