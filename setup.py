"""Installs the three source folders under one import name: ``providers/`` as ``tokrace.providers``, ``tui/`` as
``tokrace.tui`` and ``themes/`` as ``tokrace.themes``, with every subpackage found (a new folder needs no listing)."""

from setuptools import find_packages, setup

ROOTS = ("providers", "tui", "themes")

setup(
    packages=[f"tokrace.{root}{'.' + sub if sub else ''}" for root in ROOTS for sub in ("", *find_packages(root))],
    package_dir={f"tokrace.{root}": root for root in ROOTS},
)
