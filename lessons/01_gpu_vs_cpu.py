# %% [markdown]
# # Lesson 1: GPU vs CPU
# %% [readonly] id=setup
import cudacourse
from cudacourse import quiz
import cudacourse.check
from numba import cuda
import numpy as np
# %% [solution] id=vector_add
@cuda.jit
def vector_add(a, b, out):
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
    ### END SOLUTION
# %% [tests] id=test_vector_add points=3
cudacourse.check.check_vector_add(vector_add)
### BEGIN HIDDEN TESTS
cudacourse.check.check_vector_add(vector_add, hidden=True)
### END HIDDEN TESTS
