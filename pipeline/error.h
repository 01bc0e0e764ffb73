// Errors are exceptions that say what failed and where (file, op, tensor, CUDA call); library code never
// exits or prints. main maps them to one line and an exit code. Defined with the kernels, which throw too.
#pragma once
#include "kernels/error.h"
