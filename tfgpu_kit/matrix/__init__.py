"""The data of images/: the spec, the catalog of images, the TensorFlow → CUDA → driver matrix,
the compatibility rules and the locks (wheels, bases)."""
