"""grader.prepare: what the verdict server's environment is built from."""
import json
import subprocess
import sys

CHILD = """
import json, sys
import cudacourse.grader.prepare as P
env = P._verdict_env({})
print(json.dumps([P.device.__name__, P.device.chosen(), "numba.cuda" in sys.modules,
                  env.get("CUDACOURSE_GRADING")]))
"""


def test_the_verdict_env_is_built_in_a_grading_process_that_chooses_no_device():
    """The grader is imported as itself (nbgrader's config imports cudacourse.grader): the
    device probe handed to the verdict server is made there with the ctypes probe only, and
    the grading process chooses no device and never imports numba.cuda."""
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    name, chosen, numba_cuda, grading = json.loads(out.stdout.splitlines()[-1])
    assert name == "cudacourse.device"
    assert chosen is False and numba_cuda is False
    assert grading == "1"
