"""The CPU types the benchmarks tell apart, and what "auto" settings pick on each.

The one owner of this machine's CPU description: the model name, vendor and flags of
/proc/cpuinfo (CpuInfo), the type they make (CpuInfo.kind), and per type the dtype and XLA
setting that trained fastest (CPU_TYPES), which bert_tf.training.precision applies to
--dtype=auto and --jit_compile=auto and tools/benchmark.py records with every figure. No
TensorFlow: the benchmark's machine line reads it where only JAX is installed.
"""

import dataclasses

# CPU features with native bfloat16 matmuls (oneDNN); without them bfloat16 is emulated.
_CPU_BF16_FEATURES = ("avx512_bf16", "amx_bf16")


@dataclasses.dataclass(frozen=True)
class CpuType:
    """What "auto" chooses on one type of CPU, from the benchmarks (docs/benchmarks.md).

    name: the type, as the benchmark tables are titled.
    dtype: --dtype=auto for a step whose batches keep one shape (pre-training).
    varying_shapes_dtype: --dtype=auto when batches change shape (length buckets), where XLA
      would compile once per shape.
    xla_dtypes: the dtype policies under which --jit_compile=auto compiles the step with XLA.
    measured: the figures behind the choice.
    """

    name: str
    dtype: str
    varying_shapes_dtype: str
    xla_dtypes: tuple = ()
    measured: str = ""


CPU_TYPES = {
    "amx": CpuType(
        "Intel Xeon with AMX", "mixed_bfloat16", "mixed_bfloat16", (),
        "fine-tuning all-MiniLM-L6-v2: mixed_bfloat16 1.2x float32 (2026-11-24)"),
    "intel_avx512_bf16": CpuType(
        "Intel Xeon with AVX512_BF16, without AMX", "mixed_bfloat16", "float32",
        ("mixed_bfloat16",),
        "BERT-small pre-training: mixed_bfloat16 with XLA 1,601 tokens/s, float32 1,269, "
        "float32 with XLA 838, mixed_bfloat16 without XLA 720 (oneDNN's bfloat16 matmul at half "
        "its float32 peak there; 2026-11-28, loaded)"),
    "amd_avx512_bf16": CpuType(
        "AMD EPYC with AVX512_BF16 (Zen 4, Zen 5)", "mixed_bfloat16", "mixed_bfloat16", (),
        "BERT-small pre-training step, CPU seconds: mixed_bfloat16 1.5, float32 2.4, with XLA "
        "3.6 both (2026-12-04); matmul peak bfloat16 800 GFLOP/s, float32 465"),
    "avx512": CpuType("x86 with AVX-512, without bfloat16", "float32", "float32", (),
                      "bfloat16 emulated (not measured)"),
    "avx2": CpuType(
        "AVX2 without AVX-512 (AMD EPYC)", "float32", "float32", (),
        "BERT-tiny step 614 ms float32, 918 ms mixed_bfloat16; XLA slower (2026-11-23)"),
    "other": CpuType("other CPU", "float32", "float32", ()),
}


# The flags the benchmark records beside the type: they decide oneDNN's and XLA's kernels.
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16",
               "amx_tile")


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """The first processor of /proc/cpuinfo: model name, vendor, family and flags."""

    model_name: str = ""
    vendor: str = ""
    family: int | None = None
    model: int | None = None
    flags: frozenset = frozenset()

    @property
    def kind(self):
        """The key of CPU_TYPES this CPU belongs to."""
        if "amx_bf16" in self.flags:
            return "amx"
        if "avx512_bf16" in self.flags:
            return "amd_avx512_bf16" if self.vendor == "AuthenticAMD" else "intel_avx512_bf16"
        if "avx512f" in self.flags:
            return "avx512"
        return "avx2" if "avx2" in self.flags else "other"

    @property
    def native_bfloat16(self):
        return any(flag in self.flags for flag in _CPU_BF16_FEATURES)


def cpu_info(cpuinfo_path="/proc/cpuinfo"):
    """CpuInfo of this machine; unreadable (not Linux) is an empty CpuInfo (kind "other")."""
    fields = {}
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block only
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return CpuInfo()

    def number(key):
        return int(fields[key]) if fields.get(key, "").isdigit() else None

    return CpuInfo(fields.get("model name", ""), fields.get("vendor_id", ""),
                   number("cpu family"), number("model"),
                   frozenset(fields.get("flags", "").split()))


def describe(cpuinfo_path="/proc/cpuinfo"):
    """The machine's CPU for a benchmark record: model name, vendor, family, model, type (a key
    of CPU_TYPES and its name) and the SPEED_FLAGS it has."""
    info = cpu_info(cpuinfo_path)
    return {"cpu": info.model_name, "cpu_vendor": info.vendor, "cpu_family": info.family,
            "cpu_model": info.model, "cpu_kind": info.kind,
            "cpu_type": CPU_TYPES[info.kind].name,
            "cpu_flags": {flag: flag in info.flags for flag in SPEED_FLAGS}}

