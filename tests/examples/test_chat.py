"""ember-chat runs a scripted session: two turns, /reset, one turn, /quit.

Checks that answers stream after "assistant> ", that every answer reports its timing, that the
history grows (turn 2's prompt is longer than turn 1's and reuses its KV from the prefix cache)
and that /reset really forgets it (turn 3's prompt is back to a single question)."""
import re
import sys

from example_support import Checks, model_argument, run

binary = sys.argv[1]
model, real = model_argument(sys.argv[2])

script = "Hello there, who are you?\nWhat did I just ask you?\n/reset\nHello there, who are you?\n/quit\n"
max_tokens = "12"
proc = run([binary, "--model", model, "--max-tokens", max_tokens, "--temperature", "0",
            "--threads", "2", "--system", "You are a helpful assistant."], script)

c = Checks()
c.expect(proc.returncode == 0, f"exit status 0 (got {proc.returncode})")
out = proc.stdout
c.expect(out.count("assistant> ") == 3, "three answers")
c.expect("(conversation cleared)" in out, "/reset is acknowledged")
timing = re.compile(r"\[(\w+)\] ttft ([\d.]+) ms \| ([\d.]+) tok/s \| (\d+) generated \| "
                    r"prompt (\d+) tokens, (\d+) reused from the prefix cache")
turns = [tuple(m.groups()) for m in timing.finditer(out)]
c.expect(len(turns) == 3, f"three timing lines (got {len(turns)})")
if len(turns) == 3:
    prompt = [int(t[4]) for t in turns]
    reused = [int(t[5]) for t in turns]
    generated = [int(t[3]) for t in turns]
    c.expect(all(t[0] in ("stop", "length") for t in turns), "finish reasons are stop or length")
    c.expect(all(0 < g <= int(max_tokens) for g in generated), f"1..{max_tokens} tokens per answer")
    # A turn served almost wholly from the prefix cache can take well under 0.01 ms on the
    # synthetic model: the cold first turn must show a time, the others a number.
    c.expect(float(turns[0][1]) > 0 and all(float(t[1]) >= 0 for t in turns), "time to first token reported")
    c.expect(prompt[1] > prompt[0] + generated[0], f"turn 2 carries the history ({prompt})")
    c.expect(reused[1] > 0 and reused[1] <= prompt[0] + generated[0],
             f"turn 2 reuses turn 1 from the prefix cache ({reused[1]} tokens)")
    c.expect(prompt[2] == prompt[0], f"after /reset the prompt is one question again ({prompt})")
    c.expect(reused[2] > 0, "after /reset the system prompt still comes from the cache")
    # Greedy decoding of the same conversation gives the same answer.
    answers = re.findall(r"assistant> (.*?)\n\[", out, re.S)
    c.expect(len(answers) == 3 and answers[0] == answers[2], "same question, same greedy answer")
c.finish()
