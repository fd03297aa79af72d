"""Every program's command line (examples/common/cli.hpp): --help prints the usage on stdout and
exits 0; each flag the program documents is listed with what it does (and, taking a value, its
default); the engine's shared flags are listed, with the same help, wherever they are declared;
an unknown flag or a bad value gets a one-line error naming it, then the usage, on stderr (exit
2); a missing model file gets a message saying how to fetch one (exit 1).

  test_help.py NAME=BINARY...   (an empty BINARY: that program is not built, nothing to check)
"""
import re
import sys

from example_support import Checks, run

ENGINE = ["--model", "--precision", "--weights", "--threads", "--context", "--context-policy", "--kv-cache-mb",
          "--kv-type", "--weight-cache", "--chat-template",
          "--progress"]

# name: (its own flags, the shared engine flags it declares, positional arguments)
PROGRAMS = {
    "ember-generate": (["--prompt", "--raw", "--max-tokens", "--temperature", "--top-p", "--seed"],
                       ENGINE, []),
    "ember-chat": (["--system", "--max-tokens", "--temperature"], ENGINE, []),
    "ember-npc": (["--player", "--frame-ms", "--frames-max", "--quiet-frames", "--max-tokens",
                   "--temperature", "--step-tokens"], ENGINE, []),
    "ember-server": (["--host", "--port", "--http-threads", "--max-body-bytes",
                      "--max-prompt-tokens", "--max-requests", "--batch-min", "--batch-wait-ms",
                      "--max-connections", "--header-timeout-ms", "--body-timeout-ms", "--lora", "--schema-dir"],
                     ENGINE, []),
    "ember-inspect": (["--template"], [], ["MODEL.gguf"]),
    "ember-bench": (["--device", "--precision", "--workload", "--repeats", "--requests",
                     "--configs", "--turns", "--speculative-tokens", "--no-bandwidth", "--json", "--lora"],
                    ["--model", "--threads"], []),
    "ember-logits": (["--tokens", "--out", "--positions"],
                     ["--model", "--precision", "--weights", "--threads", "--kv-type"], []),
    "ember-make-synthetic": (["--type", "--chat-template", "--reasoning-tokens", "--adapter", "--adapter-rank",
                              "--adapter-alpha", "--adapter-seed", "--adapter-tensors", "--tensor-per-expert"],
                             [], ["SHAPE", "OUT.gguf", "OUT.json"]),
}

# Arguments that get a program past its other checks to the point where it opens the model.
BEFORE_MODEL = {"ember-logits": ["--tokens", "tokens.json", "--out", "logits.npy"]}
MISSING_MODEL = "/nonexistent/no-such-model.gguf"


def sections(usage):
    """{section: {row name: row text}}: a row starts at column 2 ("  --flag VALUE  help"), its
    help may go on over lines indented further."""
    result, rows, row = {}, None, None
    for line in usage.splitlines():
        if re.fullmatch(r"[a-z]+:", line):
            rows = result.setdefault(line[:-1], {})
            row = None
        elif rows is not None and re.match(r"  \S", line):
            left, _, text = line.strip().partition("  ")
            row = left.split(" ")[0].rstrip(",")
            rows[row] = {"left": left, "text": text.strip()}
        elif rows is not None and row is not None and line.startswith("   "):
            rows[row]["text"] = (rows[row]["text"] + " " + line.strip()).strip()
    return result


def without_default(text):
    return re.sub(r"\s*\(default: .*\)$", "", text)


c = Checks()
shared_help = {}  # engine flag -> {program: its help without the default}
for arg in sys.argv[1:]:
    name, _, binary = arg.partition("=")
    if not binary:
        print(f"not built: {name}")
        continue
    own, shared, positionals = PROGRAMS[name]

    # --help: the usage on stdout, nothing on stderr, exit 0.
    proc = run([binary, "--help"], timeout=30)
    c.expect(proc.returncode == 0, f"{name} --help exits 0 (got {proc.returncode})")
    c.expect(proc.stdout.startswith(f"usage: {name} "), f"{name} --help: 'usage: {name}' on stdout")
    c.expect(proc.stderr == "", f"{name} --help: nothing on stderr")
    found = sections(proc.stdout)
    flags = found.get("flags", {})
    expected = set(own) | set(shared) | {"-h"}
    c.expect(set(flags) == expected,
             f"{name} lists exactly its flags (missing {sorted(expected - set(flags))}, "
             f"unexpected {sorted(set(flags) - expected)})")
    for flag, row in flags.items():
        c.expect(without_default(row["text"]) != "", f"{name} {flag}: says what it does")
        if " " in row["left"] and flag != "-h":  # takes a value: says its default
            c.expect("(default: " in row["text"] or "(required)" in row["text"],
                     f"{name} {flag}: shows its default")
    for flag in shared:
        if flag in flags:
            shared_help.setdefault(flag, {})[name] = without_default(flags[flag]["text"])
    c.expect(list(found.get("arguments", {})) == positionals,
             f"{name} lists its arguments {positionals} (got {list(found.get('arguments', {}))})")

    # An unknown flag: one line naming it, then the usage, on stderr; nothing on stdout; exit 2.
    proc = run([binary, "--no-such-flag"], timeout=30)
    first = proc.stderr.splitlines()[0] if proc.stderr else ""
    c.expect(proc.returncode == 2, f"{name} --no-such-flag exits 2 (got {proc.returncode})")
    c.expect("--no-such-flag" in first, f"{name}: the first stderr line names the flag ({first!r})")
    c.expect("usage:" in proc.stderr, f"{name}: the usage follows on stderr")
    c.expect(proc.stdout == "", f"{name} --no-such-flag: nothing on stdout")

    # A bad value: the same, naming the flag.
    if "--threads" in flags:
        proc = run([binary, "--threads", "many"], timeout=30)
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        c.expect(proc.returncode == 2 and "--threads" in first and "usage:" in proc.stderr,
                 f"{name} --threads many: exit 2, the flag named, then the usage ({first!r})")
    if positionals:  # a required argument left out
        proc = run([binary], timeout=30)
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        c.expect(proc.returncode == 2 and positionals[0] in first and "usage:" in proc.stderr,
                 f"{name} without {positionals[0]}: exit 2, the argument named ({first!r})")

    # No model file: how to get one.
    if "--model" in flags or name == "ember-inspect":
        model_args = [MISSING_MODEL] if name == "ember-inspect" else ["--model", MISSING_MODEL]
        proc = run([binary, *BEFORE_MODEL.get(name, []), *model_args], stdin_text="", timeout=30)
        c.expect(proc.returncode == 1 and MISSING_MODEL in proc.stderr and
                 "scripts/fetch-model.sh" in proc.stderr,
                 f"{name} on a missing model: exit 1, saying how to fetch one (got {proc.returncode})")

for flag, by_program in sorted(shared_help.items()):
    c.expect(len(set(by_program.values())) == 1,
             f"{flag} means the same in {sorted(by_program)} ({sorted(set(by_program.values()))})")
c.finish()
