"""Floods stdout with 32 MiB of lines, prints a marker, then exits with code 4."""

import sys

line = "flood " + "x" * 1017 + "\n"
for _ in range(32 * 1024):
    sys.stdout.write(line)
sys.stdout.write("flood done: exiting with code 4\n")
sys.stdout.flush()
sys.exit(4)
