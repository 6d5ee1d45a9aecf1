"""``python -m cudacourse.bench``: the same as ``cudacourse bench``."""

import os
import sys

from . import main

os.environ.setdefault("CUDACOURSE_BENCH_PROG", "python -m cudacourse.bench")
sys.exit(main())
