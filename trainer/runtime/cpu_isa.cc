#include "trainer/runtime/cpu_isa.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#if defined(__x86_64__)
#include <cpuid.h>
#define SPOTPS_X86 1
#endif

namespace spotps {
namespace {

#ifdef SPOTPS_X86
// arch_prctl codes and the XSAVE feature number from <asm/prctl.h> and the
// kernel's fpu headers, spelled out because older headers lack them.
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool Bit(uint32_t word, int bit) { return (word >> bit) & 1u; }

struct CpuidRegisters {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegisters Cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidRegisters r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) {
    return CpuidRegisters{};
  }
  return r;
}

uint64_t ReadXcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

// XCR0 state-component groups each extension needs saved across switches.
constexpr uint64_t kXcr0Avx = 0x6;           // SSE + AVX (ymm).
constexpr uint64_t kXcr0Avx512 = 0xe0;       // opmask + zmm upper halves + zmm16-31.
constexpr uint64_t kXcr0AmxTiles = 0x60000;  // XTILECFG + XTILEDATA.

bool Enabled(uint64_t xcr0, uint64_t mask) { return (xcr0 & mask) == mask; }
#endif

}  // namespace

bool CpuFeatures::operator==(const CpuFeatures& other) const {
  return avx2 == other.avx2 && avx512f == other.avx512f && avx512_core == other.avx512_core &&
         avx512_bf16 == other.avx512_bf16 && amx_tile == other.amx_tile &&
         amx_bf16 == other.amx_bf16;
}

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512Core:
      return "avx512_core";
    case CpuIsa::kAvx512Bf16:
      return "avx512_bf16";
    case CpuIsa::kAmxBf16:
      return "amx_bf16";
  }
  return "unknown";
}

CpuIsa BestCpuIsa(const CpuFeatures& f) {
  if (f.avx512_core && f.avx512_bf16 && f.has_amx()) return CpuIsa::kAmxBf16;
  if (f.avx512_core && f.avx512_bf16) return CpuIsa::kAvx512Bf16;
  if (f.avx512_core) return CpuIsa::kAvx512Core;
  if (f.avx2) return CpuIsa::kAvx2;
  return CpuIsa::kBaseline;
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#ifdef SPOTPS_X86
  const CpuidRegisters leaf1 = Cpuid(1, 0);
  const bool osxsave = Bit(leaf1.ecx, 27);
  if (!osxsave) return f;
  const uint64_t xcr0 = ReadXcr0();
  const CpuidRegisters leaf7 = Cpuid(7, 0);
  const CpuidRegisters leaf7_1 = Cpuid(7, 1);

  const bool avx_state = Enabled(xcr0, kXcr0Avx);
  const bool avx512_state = avx_state && Enabled(xcr0, kXcr0Avx512);
  const bool amx_state = Enabled(xcr0, kXcr0AmxTiles);

  f.avx2 = avx_state && Bit(leaf7.ebx, 5);
  f.avx512f = avx512_state && Bit(leaf7.ebx, 16);
  f.avx512_core = f.avx512f && Bit(leaf7.ebx, 17) && Bit(leaf7.ebx, 30) && Bit(leaf7.ebx, 31);
  f.avx512_bf16 = f.avx512f && Bit(leaf7_1.eax, 5);
  f.amx_bf16 = amx_state && Bit(leaf7.edx, 22);
  f.amx_tile = amx_state && Bit(leaf7.edx, 24);
#endif
  return f;
}

CpuFeatures CpuFeaturesFromCpuinfo(absl::string_view cpuinfo) {
  CpuFeatures f;
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (!absl::StartsWith(line, "flags")) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    bool avx512dq = false, avx512bw = false, avx512vl = false;
    for (absl::string_view flag : absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipEmpty())) {
      flag = absl::StripAsciiWhitespace(flag);
      f.avx2 |= flag == "avx2";
      f.avx512f |= flag == "avx512f";
      avx512dq |= flag == "avx512dq";
      avx512bw |= flag == "avx512bw";
      avx512vl |= flag == "avx512vl";
      f.avx512_bf16 |= flag == "avx512_bf16";
      f.amx_tile |= flag == "amx_tile";
      f.amx_bf16 |= flag == "amx_bf16";
    }
    f.avx512_core = f.avx512f && avx512dq && avx512bw && avx512vl;
    break;
  }
  return f;
}

absl::StatusOr<CpuFeatures> ReadCpuinfoFeatures(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << file.rdbuf();
  return CpuFeaturesFromCpuinfo(text.str());
}

bool HasAmxPermission() {
#ifdef SPOTPS_X86
  uint64_t permitted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) != 0) {
    return false;
  }
  return (permitted >> kXfeatureXtiledata) & 1u;
#else
  return false;
#endif
}

absl::Status RequestAmxPermission() {
#ifdef SPOTPS_X86
  if (HasAmxPermission()) return absl::OkStatus();
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return absl::ErrnoToStatus(errno,
                               "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed "
                               "(kernel older than 5.16, or AMX hidden by the hypervisor)");
  }
  return absl::OkStatus();
#else
  return absl::UnimplementedError("AMX exists only on x86-64");
#endif
}

}  // namespace spotps
