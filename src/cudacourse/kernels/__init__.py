"""The lessons' kernels: per topic, the NumPy reference, the kernels and their launcher."""
