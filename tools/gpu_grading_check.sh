#!/usr/bin/env bash
# Kept for the command docs/instructors.md used to give: the GPU grading check is now
# tools/gpu/grading.sh (`cudacourse grade` on lesson 1's sample class, in bubblewrap when it
# works on that machine, else the fallback, recorded). From the repository root:
#
#     bash .whl/on-device.sh bash tools/gpu_grading_check.sh
exec bash "$(dirname "$0")/gpu/grading.sh" "$@"
