"""`build.py verify`: what an image really holds, observed by running it (`observe`: the runtime's
report and TensorFlow's verdict on the fake NVIDIA driver), judged against the matrix (`checks`),
image by image with its size budget (`images`)."""
