"""Helpers shared by the example tests: the model argument and failure reporting."""
import os
import subprocess
import sys

SKIP = 77  # ctest's SKIP_RETURN_CODE


def default_model():
    """The default model as ember's C++ tests find it, or None."""
    env = os.environ.get("EMBER_MODEL")
    if env:
        return env
    base = os.environ.get("EMBER_MODEL_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ember")
    path = os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.isfile(path) else None


def model_argument(arg):
    """`--default-model` resolves the default model or skips the test; anything else is a path."""
    if arg != "--default-model":
        return arg, False
    path = default_model()
    if path is None:
        print("SKIPPED: the default model is not available; run scripts/fetch-model.sh or set EMBER_MODEL")
        sys.exit(SKIP)
    return path, True


def run(cmd, stdin_text=None, timeout=120):
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, input=stdin_text, capture_output=True, text=True, timeout=timeout,
                          errors="replace")
    print(proc.stdout)
    print(proc.stderr, file=sys.stderr)
    return proc


class Checks:
    """Collects failed expectations so one run reports all of them."""

    def __init__(self):
        self.failures = []

    def expect(self, condition, what):
        print(("ok:   " if condition else "FAIL: ") + what, flush=True)
        if not condition:
            self.failures.append(what)

    def finish(self):
        if self.failures:
            print(f"{len(self.failures)} check(s) failed")
            sys.exit(1)
        print("all checks passed")
        sys.exit(0)
