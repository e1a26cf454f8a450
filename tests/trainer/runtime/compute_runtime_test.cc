#include "trainer/runtime/compute_runtime.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "trainer/runtime/cpu_isa.h"
#include "trainer/runtime/cpu_topology.h"
#include "trainer/runtime/openblas.h"

namespace spotps {
namespace {

TEST(CpuIsaTest, CpuidAgreesWithProcCpuinfo) {
  absl::StatusOr<CpuFeatures> listed = ReadCpuinfoFeatures();
  ASSERT_TRUE(listed.ok()) << listed.status();
  const CpuFeatures detected = DetectCpuFeatures();
  EXPECT_EQ(detected.avx2, listed->avx2);
  EXPECT_EQ(detected.avx512f, listed->avx512f);
  EXPECT_EQ(detected.avx512_core, listed->avx512_core);
  EXPECT_EQ(detected.avx512_bf16, listed->avx512_bf16);
  EXPECT_EQ(detected.amx_tile, listed->amx_tile);
  EXPECT_EQ(detected.amx_bf16, listed->amx_bf16);
  EXPECT_EQ(BestCpuIsa(detected), BestCpuIsa(*listed));
}

TEST(CpuIsaTest, ParsesCpuinfoFlagsLine) {
  const CpuFeatures sapphire_rapids = CpuFeaturesFromCpuinfo(
      "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512dq avx512bw "
      "avx512vl avx512_bf16 amx_bf16 amx_tile amx_int8\nbugs\t\t: x\n");
  EXPECT_TRUE(sapphire_rapids.has_amx());
  EXPECT_EQ(BestCpuIsa(sapphire_rapids), CpuIsa::kAmxBf16);

  const CpuFeatures no_bw =
      CpuFeaturesFromCpuinfo("flags\t: avx2 avx512f avx512dq avx512vl avx512_bf16\n");
  EXPECT_TRUE(no_bw.avx512f);
  EXPECT_FALSE(no_bw.avx512_core);
  EXPECT_EQ(BestCpuIsa(no_bw), CpuIsa::kAvx2);

  // "avx2" must match whole flags only.
  EXPECT_FALSE(CpuFeaturesFromCpuinfo("flags\t: avx avx2_vnni\n").avx2);
  EXPECT_EQ(CpuIsaName(CpuIsa::kAvx512Bf16), "avx512_bf16");
}

TEST(CpuIsaTest, AmxPermissionMatchesHardware) {
  const CpuFeatures features = DetectCpuFeatures();
  if (features.has_amx()) {
    EXPECT_TRUE(RequestAmxPermission().ok());
    EXPECT_TRUE(HasAmxPermission());
  } else {
    // Without AMX state the kernel cannot have granted tile data.
    EXPECT_FALSE(HasAmxPermission());
  }
}

class FakeSysfs {
 public:
  FakeSysfs() : root_(absl::StrCat(::testing::TempDir(), "/trainer_sysfs_", getpid())) {}
  ~FakeSysfs() { std::filesystem::remove_all(root_); }

  void AddCpu(int cpu, int package, int core) {
    const std::string dir = absl::StrCat(root_, "/cpu", cpu, "/topology");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/physical_package_id") << package << "\n";
    std::ofstream(dir + "/core_id") << core << "\n";
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(CpuTopologyTest, HyperthreadSiblingsCountOnce) {
  FakeSysfs sysfs;
  sysfs.AddCpu(0, 0, 0);
  sysfs.AddCpu(1, 0, 1);
  sysfs.AddCpu(2, 0, 0);  // Sibling of cpu0.
  sysfs.AddCpu(3, 1, 0);  // Same core id, other socket.
  EXPECT_EQ(CountCoresOfCpus(sysfs.root(), {0, 1, 2, 3}), 3);
  EXPECT_EQ(CountCoresOfCpus(sysfs.root(), {0, 2}), 1);
  // Unreadable topology falls back to one core per CPU.
  EXPECT_EQ(CountCoresOfCpus(sysfs.root(), {0, 7}), 2);
}

TEST(CpuTopologyTest, PhysicalCoresFitTheAffinityMask) {
  const int cores = CountPhysicalCores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(AllowedCpus().size()));
}

TEST(ComputeRuntimeTest, DefaultsToPhysicalCoresAndPrintsRuntimeLine) {
  absl::StatusOr<ComputeRuntimeInfo> info = ConfigureComputeRuntime(ComputeRuntimeOptions{});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->threads, CountPhysicalCores());
  EXPECT_EQ(at::get_num_threads(), info->threads);
  EXPECT_EQ(info->isa_found, BestCpuIsa(DetectCpuFeatures()));

  const std::string line = RuntimeLine(*info);
  const std::vector<std::string> fields = absl::StrSplit(line, ' ');
  ASSERT_EQ(fields.size(), 5u) << line;
  EXPECT_EQ(fields[0], "runtime:");
  EXPECT_EQ(fields[1], absl::StrCat("cpu_isa=", CpuIsaName(info->isa_found)));
  EXPECT_EQ(fields[2], absl::StrCat("onednn_isa=", OneDnnIsaName(info->isa_onednn)));
  EXPECT_EQ(fields[3], absl::StrCat("threads=", info->threads));
  EXPECT_EQ(fields[4], "dtype=bf16");
}

TEST(ComputeRuntimeTest, OneDnnUsesWhatTheCpuOffers) {
  const ComputeRuntimeInfo info = *ConfigureComputeRuntime({});
  switch (info.isa_found) {
    case CpuIsa::kAmxBf16:
      EXPECT_EQ(info.isa_onednn, dnnl::cpu_isa::avx512_core_amx);
      break;
    case CpuIsa::kAvx512Bf16:
      EXPECT_EQ(info.isa_onednn, dnnl::cpu_isa::avx512_core_bf16);
      break;
    default:
      EXPECT_NE(info.isa_onednn, dnnl::cpu_isa::avx512_core_amx);
  }
  EXPECT_EQ(OneDnnIsaName(dnnl::cpu_isa::avx512_core_bf16), "avx512_core_bf16");
  EXPECT_EQ(OneDnnIsaName(dnnl::cpu_isa::avx512_core_amx), "avx512_core_amx");
}

TEST(ComputeRuntimeTest, ExplicitThreadCountIsApplied) {
  ComputeRuntimeOptions options;
  options.dtype = ComputeDType::kFP32;
  options.threads = 1;
  absl::StatusOr<ComputeRuntimeInfo> one = ConfigureComputeRuntime(options);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_TRUE(absl::EndsWith(RuntimeLine(*one), "threads=1 dtype=fp32"));

  options.threads = 3;
  ASSERT_TRUE(ConfigureComputeRuntime(options).ok());
  EXPECT_EQ(at::get_num_threads(), 3);

  options.threads = -1;
  EXPECT_EQ(ConfigureComputeRuntime(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpenBlasTest, FlagsGenericKernelsAndSuggestsCoreType) {
  CpuFeatures avx512_bf16;
  avx512_bf16.avx2 = avx512_bf16.avx512f = avx512_bf16.avx512_core = true;
  avx512_bf16.avx512_bf16 = true;
  EXPECT_TRUE(OpenBlasUnderusesCpu("Prescott", avx512_bf16));
  EXPECT_FALSE(OpenBlasUnderusesCpu("Cooperlake", avx512_bf16));
  EXPECT_FALSE(OpenBlasUnderusesCpu("Prescott", CpuFeatures{}));
  EXPECT_EQ(SuggestedOpenBlasCoreType(avx512_bf16), "Cooperlake");
  CpuFeatures avx2_only;
  avx2_only.avx2 = true;
  EXPECT_EQ(SuggestedOpenBlasCoreType(avx2_only), "Haswell");
}

TEST(ComputeRuntimeTest, CapsOpenBlasThreads) {
  using GetThreads = int();
  auto* openblas_threads =
      reinterpret_cast<GetThreads*>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (openblas_threads == nullptr) GTEST_SKIP() << "LibTorch without OpenBLAS";
  ASSERT_TRUE(OpenBlasCoreName().has_value());

  ComputeRuntimeOptions options;
  options.threads = 2;
  const ComputeRuntimeInfo capped = *ConfigureComputeRuntime(options);
  EXPECT_EQ(capped.blas_threads, 1);
  EXPECT_EQ(openblas_threads(), 1);
  EXPECT_EQ(capped.blas_core, *OpenBlasCoreName());

  options.blas_threads = 0;  // Follow the intra-op count.
  EXPECT_EQ(ConfigureComputeRuntime(options)->blas_threads, 2);
  EXPECT_EQ(openblas_threads(), 2);
}

}  // namespace
}  // namespace spotps
