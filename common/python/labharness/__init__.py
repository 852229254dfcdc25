"""The small harness of the lab's Python sections (09_triton, 10_flex): the same options, checks,
exit codes, records and dumps as the C++ harness (common/harness/), written once for Python.

A section file declares a Section and a `forward(ctx)` that returns a launch function, then calls
`main(section, forward)`. The harness parses and validates the options (bad input: exit 2, one
line, nothing launched), makes the seeded inputs (the same bits as the CUDA sections), poisons the
outputs, launches once, checks against fp64 with the lab's tolerance rule, times (CUDA events,
warm-up, median), prints the summary and the PASS/FAIL line, appends the record and writes the
dump. Exit codes: 0 pass, 1 check failed, 2 bad input, 77 cannot run here. No traceback reaches a
user: every error ends as one line.
"""
import os
import sys

from .options import BadInput, CannotRun, NotChecked, Section  # noqa: F401
from .run import main  # noqa: F401

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_CANNOT_RUN = 0, 1, 2, 77
