"""Builds prepshards' C crop/flip kernel (prepshards/_window.c) with the package.

It is a plain shared library that _native.py loads through ctypes, not a
Python extension: no Python headers are needed. Where it cannot be built
(no C compiler), the package installs without it and numpy does the same
work, slower (``prepshards._native.why_not`` says why).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("prepshards._window", ["prepshards/_window.c"], optional=True)])
