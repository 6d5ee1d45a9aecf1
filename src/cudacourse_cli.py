"""Entry point of the ``cudacourse`` command.

It lives outside the package so that ``cudacourse doctor`` can run (and explain) even when
the environment is too broken for ``import cudacourse`` to succeed.
"""

import os
import sys


def main() -> int:
    os.environ.setdefault("CUDACOURSE_QUIET", "1")
    os.environ["CUDACOURSE_CLI"] = "1"
    from cudacourse.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
