"""Command-line plumbing shared by ``python -m theory`` and ``python -m simulate``.

Bad input on the command line ends with exit code 2 and exactly one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["CliParser", "fail"]


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    """Print ``prog: error: message`` as one line on stderr and exit with ``code``."""
    one_line = " ".join(str(message).split())
    print(f"{prog}: error: {one_line}", file=sys.stderr)
    raise SystemExit(code)


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see --help)")
