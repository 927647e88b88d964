"""Build side of the tfgpu kit: image specs, the compatibility matrix, rendering,
building, verifying and planning. `build.py` is a thin command layer over it.

This package never ships inside an image; the runtime package `tfgpu`
(entrypoint/) does, and it never imports from here."""
