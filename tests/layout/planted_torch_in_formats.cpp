// Planted for layout.compiler_guard.torch_in_formats: a file that sees what the
// formats layer sees and includes LibTorch. The parsers of foreign formats
// link no LibTorch (lib/CMakeLists.txt), so this must fail to compile.
#include <torch/torch.h>

int planted_torch_in_formats() { return static_cast<int>(torch::ones({1}).numel()); }
