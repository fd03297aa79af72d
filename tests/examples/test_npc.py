"""ember-npc runs its game loop to completion: eight replies, per-frame lines, the prefix cache
serving the shared world lore to the later characters."""
import re
import sys

from example_support import Checks, model_argument, run

binary = sys.argv[1]
model, real = model_argument(sys.argv[2])
max_tokens = 8
proc = run([binary, "--model", model, "--max-tokens", str(max_tokens), "--threads", "2",
            "--frame-ms", "16", "--quiet-frames", "2"], timeout=220)

c = Checks()
c.expect(proc.returncode == 0, f"exit status 0: every character answered (got {proc.returncode})")
out = proc.stdout
lore = re.search(r"world lore (\d+) tokens", out)
c.expect(lore is not None and int(lore.group(1)) >= 600, "the world lore is 600+ tokens")
c.expect(re.search(r"^frames\s+1-2\s+worst engine", out, re.M) is not None, "per-frame summaries")
names = ["Mayor Oswin Tall", "Captain Brannoc", "Mother Ilse", "Greta Hollis", "Tomas the smith",
         "Wren", "Old Fennick", "Sabine Dray"]
replies = re.findall(r"^(.+?): .*\n    \[(\w+)\] ttft ([\d.]+) ms \| (\d+) tokens \| prompt (\d+), (\d+) from",
                     out, re.M)
c.expect([r[0] for r in replies] == names, f"eight replies in order (got {[r[0] for r in replies]})")
c.expect(all(r[1] in ("stop", "length") for r in replies), "every reply finished")
c.expect(all(float(r[2]) > 0 for r in replies), "TTFT per character")
c.expect(all(0 < int(r[3]) <= max_tokens for r in replies), f"1..{max_tokens} tokens each")
later_reuse = [int(r[5]) for r in replies[1:]]
c.expect(lore is not None and min(later_reuse) >= int(lore.group(1)) // 2,
         f"characters 2-8 get most of the lore from the prefix cache ({later_reuse})")
summary = re.search(r"8/8 replies in (\d+) ms over (\d+) frames", out)
c.expect(summary is not None, "summary line")
reuse = re.search(r"prefix cache: (\d+) of (\d+) prompt tokens reused \(([\d.]+)%\)", out)
c.expect(reuse is not None and int(reuse.group(1)) > 0, "prefix-cache reuse > 0")
if reuse:
    c.expect(float(reuse.group(3)) > 50.0, f"more than half the prompt tokens reused ({reuse.group(3)}%)")
c.finish()
