"""Warp-level intrinsics for Numba's CUDA simulator (filled in by lesson 2's work)."""


def install() -> None:
    """Add the warp intrinsics the stock simulator lacks."""
