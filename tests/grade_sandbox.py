#!/usr/bin/env python3
"""grade_sandbox.py: the grader's sandbox (test_grade.Sandbox: a fenced-in program writes only its
grade folder, sees no network, and dies with its run), or exit 77 where bubblewrap cannot run."""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
import grade  # noqa: E402

why = grade.sandbox_problem()
if why:
    print(f"SKIP: {why}")
    sys.exit(77)
result = unittest.main(module="test_grade", argv=["grade_sandbox", "Sandbox", "-v"], exit=False).result
sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)
