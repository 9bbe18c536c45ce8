// torchrun's long flags, for argparse's prefix matching: torchrun takes
// `--nproc_per 2` for `--nproc_per_node 2`, and `--redirect 3` for `--redirects
// 3`, as argparse takes any unambiguous prefix of a long option (allow_abbrev,
// on by default). The parser (cli.cpp) does the same for these flags.
// Internal to launcher/config/.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::launcher {

// The long flags of torch 1.13's torch/distributed/run.py, as its parser spells
// them (underscores only: "nproc_per_node").
std::span<const std::string_view> Torch113Flags();
// The long flags of torch 2.x's run.py (PyTorch's main branch, late 2025), in
// their dashed spelling; each but nnodes, standalone, role, module, redirects and
// tee has an underscore alias too.
std::span<const std::string_view> Torch2Flags();

// Whether `name` (dashed, no "--": "nproc-per-node") is a flag of torchrun 1.13
// or 2.x.
bool IsTorchrunFlag(std::string_view name);

// The flags `prefix` (dashed, no "--") begins, among torchrun's and `ours`
// together: each name once, dashed, sorted.
std::vector<std::string> FlagsWithPrefix(std::string_view prefix, const std::vector<std::string>& ours);

}  // namespace dlaunch::launcher
