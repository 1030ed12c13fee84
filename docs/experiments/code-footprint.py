#!/usr/bin/env python3
"""What does code footprint cost a ping-pong whose threads share one CPU?

Raw libzmq, no RunLoopKit code: two threads on CPU 0 bounce a 93-byte message over an
inproc PAIR pair (blocking receive), and after each receive both run the same chain of
N small functions (`x = f(x)`, each alone in its 64-byte cache line). "same" calls one
function N times (the instructions, in one line); "scattered" calls N different ones in a
shuffled order (the same instructions, spread over N lines: N × 64 bytes of code).
Scattered minus same is what the footprint costs beyond the instructions.

    python3 docs/experiments/code-footprint.py

It writes the functions to /tmp/code-footprint, builds them with code-footprint.c (the
driver, beside this file) and runs each variant three times, interleaved.
"""
import os
import random
import subprocess

SIZES = (150, 300, 600, 1200)
WORK = "/tmp/code-footprint"
HERE = os.path.dirname(os.path.abspath(__file__))


def functions():
    random.seed(7)
    lines = ["#include <stdint.h>", "#include <string.h>"]
    for k in range(max(SIZES)):
        lines.append(f"__attribute__((noinline, aligned(64))) uint64_t f{k}(uint64_t x) "
                     f"{{ return (x * {2 * k + 1}u) ^ (x >> {k % 13 + 1}); }}")
    lines.append("static uint64_t none(uint64_t x) { return x; }")
    table = ['{"none", none}']
    for n in SIZES:
        order = list(range(n))
        random.shuffle(order)
        lines.append(f"static uint64_t scattered{n}(uint64_t x) {{")
        lines += [f"  x = f{k}(x);" for k in order]
        lines.append("  return x; }")
        lines.append(f"static uint64_t same{n}(uint64_t x) {{")
        lines += ["  x = f0(x);"] * n
        lines.append("  return x; }")
        table += [f'{{"same{n}", same{n}}}', f'{{"scattered{n}", scattered{n}}}']
    lines.append("typedef uint64_t (*work_fn)(uint64_t);")
    lines.append("static const struct { const char *name; work_fn fn; } works[] = { " + ", ".join(table) + " };")
    lines.append("work_fn find_work(const char *name) {")
    lines.append("  for (unsigned i = 0; i < sizeof works / sizeof works[0]; i++)")
    lines.append("    if (!strcmp(works[i].name, name)) return works[i].fn;")
    lines.append("  return 0; }")
    return "\n".join(lines) + "\n"


def main():
    os.makedirs(WORK, exist_ok=True)
    with open(f"{WORK}/functions.c", "w") as f:
        f.write(functions())
    binary = f"{WORK}/code-footprint"
    driver = os.path.join(HERE, "code-footprint.c")
    subprocess.run(["cc", "-O2", "-o", binary, driver, f"{WORK}/functions.c", "-lzmq", "-lpthread"], check=True)
    names = ["none"] + [f"{kind}{n}" for n in SIZES for kind in ("same", "scattered")]
    for _ in range(3):  # interleaved, so that drift falls on all alike
        for name in names:
            subprocess.run([binary, name], check=True)


if __name__ == "__main__":
    main()
