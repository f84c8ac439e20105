"""What the command-line tool tests share: checks that collect failures
instead of stopping at the first, running a tool, saving an ONNX model."""
import subprocess
import sys

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(tool, *args, timeout=300):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=timeout)


def save(model, path):
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def finish(what):
    """Prints the verdict and returns the exit status."""
    if failures:
        print(f"{what}: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print(f"{what}: all checks passed")
    return 0
