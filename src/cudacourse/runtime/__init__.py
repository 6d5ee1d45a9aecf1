"""What runs the kernels on either device: the device choice, launches, arrays, timing, intrinsics, the simulator's warp and block extensions, hardware figures."""
