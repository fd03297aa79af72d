#!/usr/bin/env python3
"""Checks grammar_corpus_driver's outputs for the GBNF corpus (tests/data/grammar/grammars.json)
with recognisers written here by hand from each grammar's definition, sharing no code with
ember's grammar engine: an output must have finished with `stop` and be a whole string of its
grammar's language.

    validate_gbnf.py GRAMMARS.json OUTPUTS.jsonl
"""
import json
import string
import sys

from corpus_outputs import check_outputs


class Reader:
    """A cursor over the text; each recogniser below consumes its construct or raises."""

    def __init__(self, text):
        self.text, self.pos = text, 0

    def peek(self):
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self, literal):
        if not self.text.startswith(literal, self.pos):
            raise ValueError(f"expected {literal!r} at {self.pos}")
        self.pos += len(literal)

    def run(self, allowed, lo, hi):
        """lo..hi characters from the set `allowed`, greedily (every grammar below is such that
        the greedy run is the only one that can continue)."""
        start = self.pos
        while self.pos - start < hi and self.peek() and self.peek() in allowed:
            self.pos += 1
        if self.pos - start < lo:
            raise ValueError(f"expected {lo}+ of a class at {start}")
        return self.text[start:self.pos]

    def at_end(self):
        return self.pos == len(self.text)


def arithmetic(r):
    def expr():
        term()
        for _ in range(4):
            save = r.pos
            if r.peek() == " ":
                r.pos += 1
            if r.peek() not in ("+", "-") or not r.peek():
                r.pos = save
                return
            r.pos += 1
            if r.peek() == " ":
                r.pos += 1
            term()

    def term():
        factor()
        for _ in range(2):
            if r.peek() not in ("*", "/") or not r.peek():
                return
            r.pos += 1
            factor()

    def factor():
        if r.peek() == "(":
            r.take("(")
            expr()
            r.take(")")
        else:
            r.run(string.digits, 1, 4)

    expr()


def item_list(r):
    items = 0
    while items < 5 and r.peek() == "-":
        r.take("- ")
        r.run(string.ascii_letters, 1, 1)
        r.run(string.ascii_letters + " ,'", 0, 39)
        r.take("\n")
        items += 1
    if items == 0:
        raise ValueError("no item")


def phrases(r):
    greetings = ["Hello!", "Greetings, traveller.", "Well met."]
    answers = ["I will help.", "Go away.", "Come back tomorrow."]
    if r.text not in {f"{g} {a}" for g in greetings for a in answers}:
        raise ValueError("not one of the 9 phrases")
    r.pos = len(r.text)


def nested(r):
    def node():
        r.take("(")
        r.run(string.ascii_lowercase, 1, 8)
        for _ in range(3):
            if r.peek() != " ":
                break
            r.take(" ")
            node()
        r.take(")")

    node()


def settings(r):
    lines = 0
    while lines < 4 and r.peek() and r.peek() in string.ascii_lowercase:
        r.run(string.ascii_lowercase, 1, 1)
        r.run(string.ascii_lowercase + "_", 0, 11)
        r.take(" = ")
        if r.peek() == '"':
            r.take('"')
            start = r.pos
            while r.pos - start < 20 and r.peek() and r.peek() not in '"\n':
                r.pos += 1
            r.take('"')
        elif r.text.startswith("true", r.pos):
            r.take("true")
        elif r.text.startswith("false", r.pos):
            r.take("false")
        else:
            r.run(string.digits, 1, 5)
        r.take("\n")
        lines += 1
    if lines == 0:
        raise ValueError("no line")


RECOGNISERS = {"arithmetic": arithmetic, "list": item_list, "phrases": phrases,
               "nested": nested, "settings": settings}


def in_language(name, text):
    r = Reader(text)
    try:
        RECOGNISERS[name](r)
    except ValueError as e:
        return str(e)
    return None if r.at_end() else f"text left over at {r.pos}"


def main():
    names = [e["name"] for e in json.load(open(sys.argv[1], encoding="utf-8"))]
    failures = [f"{n}: no recogniser" for n in names if n not in RECOGNISERS]
    # The recognisers must refuse near misses, or they would pass anything.
    for name, bad in [("arithmetic", "(1+2"), ("arithmetic", "1+2+3+4+5+6"), ("list", "- a\n" * 6),
                      ("phrases", "Hello! Go away"), ("nested", "(a (b) (c) (d) (e))"),
                      ("settings", 'x = "a\n')]:
        if in_language(name, bad) is None:
            failures.append(f"{name}: the recogniser accepts {bad!r}")
    return check_outputs("validate_gbnf", "grammars", sys.argv[1], sys.argv[2], in_language, failures)


if __name__ == "__main__":
    sys.exit(main())
