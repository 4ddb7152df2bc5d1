// hip.unified host heuristics: which kernel (2D narrow, 2D flash, 3D split-KV decode), its launch geometry, KV
// splits and workspace, and whether to replay a graph. Pure host C++ (no HIP headers): built in every build, so it
// is unit-tested on machines without the HIP compiler or an AMD GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnbench/attention.hpp"
#include "attnbench/kernel.hpp"
#include "attnbench/knobs.hpp"
#include "hip/geometry.hpp"

namespace attnbench::hip {

// Used when no device can be asked: the MI300X's compute units.
constexpr int kDefaultCuCount = 304;
constexpr int kMaxSplits = 128;
constexpr int kMinTilesPerSplit = 4;

enum class Regime { narrow, flash, decode };
const char* regime_name(Regime r);

// HIPDNN_GFX942_FLASH_WIDE: 1 (or unset) wide4, 0 L4, 2 wide2.
enum class FlashGeometry { l4, wide2, wide4 };
const char* geometry_name(FlashGeometry g);
int geometry_waves(FlashGeometry g);

// ATTNBENCH_GFX942_PATH: auto = flash where it exists (fp16, head size 64 or 128), else narrow.
enum class PathKnob { automatic, narrow, flash };

// hip.unified's knobs, each parsed once from its string; the member defaults are the knob table's.
struct HipKnobs {
  PathKnob path = PathKnob::automatic;         // ATTNBENCH_GFX942_PATH
  FlashGeometry flash = FlashGeometry::wide4;  // HIPDNN_GFX942_FLASH_WIDE
  bool q_major = false;                        // ATTNBENCH_Q_MAJOR_GRID
  int splits_3d = 0;                           // ATTNBENCH_3D_SPLITS; 0 = heuristic
  bool graph_2d = true;                        // HIPDNN_GFX942_2D_GRAPH
  bool graph_3d = true;                        // HIPDNN_GFX942_3D_GRAPH
  static HipKnobs parse(const KnobValues& knobs);
};

// The kernel instance a plan runs (kernels/hip/instances.cmake): narrow/<dtype>/d<D>/w<waves>,
// flash/<dtype>/d<D>/<geometry>, decode/<dtype>/d<D>.
struct InstanceKey {
  Regime regime = Regime::narrow;
  DType dtype = DType::bf16;
  int head_size = 0;
  int waves = 0;
  bool operator==(const InstanceKey& o) const {
    return regime == o.regime && dtype == o.dtype && head_size == o.head_size && waves == o.waves;
  }
  bool operator!=(const InstanceKey& o) const { return !(*this == o); }
};
std::string instance_name(const InstanceKey& k);

// Everything plan() derives once: regime, geometry, grid, splits, workspace and the LDS the kernel declares.
struct LaunchPlan {
  Regime regime = Regime::narrow;
  FlashGeometry geometry = FlashGeometry::wide4;  // flash
  int waves = 0, threads = 0;
  int block_m = 0;        // packed rows per workgroup
  int k_buffers = 1;      // flash: K tiles in LDS
  bool q_major = false;   // 2D: q blocks on grid.x
  int q_blocks = 0;       // 2D: q blocks of the longest sequence; 3D: row tiles
  int splits = 1;         // 3D
  int grid_x = 0, grid_y = 0, grid_z = 0;
  int combine_blocks = 0;  // 3D with splits > 1: workgroups of the combine kernel
  std::size_t workspace_bytes = 0;
  int lds_bytes = 0;
  std::string summary;
};

// The problem's shape, types and features against what the kernels implement ("" = takes it).
std::string problem_conflict(const AttentionProblem& p);
// Whether the problem runs the 3D decode kernel: one query per sequence, or few packed rows over a long KV.
bool use_decode(const AttentionProblem& p);
// The 2D regime under ATTNBENCH_GFX942_PATH (the flash regime only where it exists).
Regime prefill_regime(const AttentionProblem& p, const HipKnobs& knobs);
// Why the knobs cannot run this problem (ATTNBENCH_GFX942_PATH=flash where there is no flash kernel, a grid past
// its limits); "" when they can.
std::string knob_conflict(const AttentionProblem& p, const HipKnobs& knobs);
// 3D: KV splits, forced (ATTNBENCH_3D_SPLITS, capped at kMaxSplits and the tiles) or enough to fill the CUs with
// at least kMinTilesPerSplit tiles each.
int decode_splits(const AttentionProblem& p, const HipKnobs& knobs, int cu_count);
std::size_t decode_workspace_bytes(const AttentionProblem& p, int splits);
// decode yes (HIPDNN_GFX942_3D_GRAPH), max_seqlen_q <= 768 yes (HIPDNN_GFX942_2D_GRAPH), longer no; never while
// the caller captures, never for a feature-flagged problem.
bool recommend_graph_replay(const AttentionProblem& p, const HipKnobs& knobs, bool caller_capturing);
// The geometry of a problem resolve() accepts.
LaunchPlan make_launch_plan(const AttentionProblem& p, const HipKnobs& knobs, int cu_count);
InstanceKey instance_key(const AttentionProblem& p, const LaunchPlan& lp);

}  // namespace attnbench::hip
