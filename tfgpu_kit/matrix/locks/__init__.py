"""The lock files of images/, which make a rebuild next month install the same bytes: one file
type (`lock_file`), the registry digest of each official base (`base_lock`, bases.lock.yaml), and
the wheels an image's context holds (`wheel_locks`: cuda-wheels.lock.yaml, image-wheels.lock.yaml).
`build.py lock` writes them (tfgpu_kit.image.lock_refresh); the build reads them."""
