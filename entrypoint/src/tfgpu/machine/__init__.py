"""The machine tier reads what the machine holds, without TensorFlow: NVML, Tegra, the GPU report,
CUDA libraries, the driver, the kernel cache, /dev/shm, the installed build and pins, the
command's PATH and Python."""
