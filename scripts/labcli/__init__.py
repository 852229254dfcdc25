"""The lab's driver, as modules that scripts/lab imports.

  common      what every command shares: the sections, building, running a program under a time limit
  setup       a fresh machine's dependencies (Debian packages, CMake's fetch, pip), and vendoring them
  student     the commands of students and instructors: run, check, test, compare, grade, release
  maintainer  the commands of whoever measures the lab on a GPU: bench, tables, ab, gpu-check, deps
"""
