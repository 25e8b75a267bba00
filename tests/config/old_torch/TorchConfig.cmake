# A stand-in for LibTorch 1.13 (Debian 12's): only its version matters, the
# configure step must stop at it before using anything else.
set(Torch_FOUND TRUE)
set(TORCH_LIBRARIES "")
set(TORCH_INCLUDE_DIRS "")
