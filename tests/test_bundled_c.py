"""The C .bpte reader (firmware/runtime/src/bundled.c) on the host, under ASan and UBSan:
it reads what our writer makes exactly as the Python reader does, names the problem and the
byte offset for crafted bad files, and never reads outside the buffer for mutated ones.
"""

from __future__ import annotations

import random
import struct
import subprocess
from pathlib import Path

import pytest
from torchmcu.pte import bundled as B
from torchmcu.pte.program import Double, Int, ScalarType

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "firmware" / "runtime"

pytestmark = pytest.mark.needs("clang", "clang-sanitizers")

# Reads a .bpte given on the command line and prints what the C reader sees.
HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "torchmcu/bundled.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) return 2;
  static unsigned char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  /* an exact-size heap copy, so ASan catches any read past the end */
  unsigned char *data = malloc(n ? n : 1);
  for (size_t i = 0; i < n; ++i) data[i] = buf[i];
  tm_bundled b;
  tm_status st = tm_bundled_load(&b, data, n);
  if (st != TM_OK) {
    printf("ERR %s %s %u\n", tm_status_name(st), b.diag.message, (unsigned)b.diag.byte_offset);
    free(data);
    return 1;
  }
  printf("OK version=%u suites=%u program=%u\n", b.version, b.num_suites, (unsigned)b.program_size);
  uint32_t suite, cases;
  if (tm_bundled_find_suite(&b, "forward", &suite, &cases) == TM_OK) {
    for (uint32_t c = 0; c < cases; ++c) {
      tm_bundled_case tc;
      if (tm_bundled_get_case(&b, suite, c, &tc) != TM_OK) return 3;
      for (int e = 0; e < 2; ++e) {
        uint32_t count = e ? tc.num_outputs : tc.num_inputs;
        for (uint32_t i = 0; i < count; ++i) {
          tm_bundled_value v;
          if (tm_bundled_get_value(&b, &tc, e != 0, i, &v) != TM_OK) return 4;
          printf("case %u %s %u kind=%u", c, e ? "out" : "in", i, v.kind);
          if (v.kind == TM_BUNDLED_TENSOR) {
            printf(" type=%u sizes=", v.scalar_type);
            for (uint32_t d = 0; d < v.dim; ++d) printf("%d,", v.sizes[d]);
            printf(" order=");
            for (uint32_t d = 0; d < v.dim; ++d) printf("%u,", v.dim_order[d]);
            printf(" data=");
            for (uint32_t k = 0; k < v.nbytes; ++k) printf("%02x", v.data[k]);
          } else if (v.kind == TM_BUNDLED_INT) {
            printf(" int=%lld", (long long)v.int_val);
          } else if (v.kind == TM_BUNDLED_DOUBLE) {
            printf(" double=%.17g", v.double_val);
          } else {
            printf(" bool=%d", (int)v.bool_val);
          }
          printf("\n");
        }
      }
    }
  }
  free(data);
  return 0;
}
"""


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory, op_tables: Path) -> Path:
    d = tmp_path_factory.mktemp("bundled-c")
    (d / "harness.c").write_text(HARNESS)
    exe = d / "harness"
    sources = [
        RUNTIME / "src" / s for s in ("bundled.c", "fb.c", "program.c", "method.c", "registry.c")
    ]
    subprocess.run(
        [
            "clang",
            "-std=c11",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            f"-I{RUNTIME / 'include'}",
            f"-I{RUNTIME / 'src'}",
            f"-I{op_tables}",  # method.c includes the registry's control_ops.inc
            str(d / "harness.c"),
            *map(str, sources),
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return exe


def _read(exe: Path, data: bytes, tmp: Path) -> subprocess.CompletedProcess[str]:
    f = tmp / "in.bpte"
    f.write_bytes(data)
    return subprocess.run(
        [str(exe), str(f)], capture_output=True, text=True, check=False, timeout=60
    )


def _bundle() -> B.BundledProgram:
    pte = b"\x10\0\0\0ET12" + bytes(56)  # the reader checks only the bundle, not the program
    x = B.BundledTensor(ScalarType.CHAR, [1, 3, 2, 2], [0, 2, 3, 1], bytes(range(12)))
    y = B.BundledTensor(ScalarType.FLOAT, [2], [0], struct.pack("<2f", 0.5, -3.25))
    case = B.BundledTestCase([x, Int(-5), Double(0.125)], [y])
    return B.BundledProgram(pte, [B.BundledMethodTestSuite("forward", [case])])


def test_reads_what_the_writer_wrote(reader: Path, tmp_path: Path) -> None:
    proc = _read(reader, B.serialize_bundled(_bundle()), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "OK version=2 suites=1 program=64"
    assert lines[1:] == [
        "case 0 in 0 kind=1 type=1 sizes=1,3,2,2, order=0,2,3,1, data=" + bytes(range(12)).hex(),
        "case 0 in 1 kind=2 int=-5",
        "case 0 in 2 kind=4 double=0.125",
        "case 0 out 0 kind=1 type=6 sizes=2, order=0, data=" + struct.pack("<2f", 0.5, -3.25).hex(),
    ]


def test_bad_files_are_named(reader: Path, tmp_path: Path) -> None:
    data = B.serialize_bundled(_bundle())
    proc = _read(reader, data[:4] + b"ET12" + data[8:], tmp_path)
    assert proc.returncode == 1 and "file identifier is not BP08 4" in proc.stdout
    # The first tensor's data vector: its length one short of what the sizes need.
    p = data.find(bytes(range(12)))
    assert struct.unpack_from("<I", data, p - 4)[0] == 12
    short = data[: p - 4] + struct.pack("<I", 11) + data[p:]
    proc = _read(reader, short, tmp_path)
    assert (
        proc.stdout.strip()
        == f"ERR INVALID_PROGRAM bundled tensor: data length differs from its sizes {p}"
    )
    # The same length past the end of the file.
    huge = data[: p - 4] + struct.pack("<I", 1 << 30) + data[p:]
    proc = _read(reader, huge, tmp_path)
    assert proc.stdout.strip() == f"ERR INVALID_PROGRAM vector length out of bounds {p - 4}"


def test_mutated_files_never_read_out_of_bounds(reader: Path, tmp_path: Path) -> None:
    data = B.serialize_bundled(_bundle())
    rng = random.Random(1234)
    for cut in range(0, len(data), 7):  # every truncation is rejected cleanly
        proc = _read(reader, data[:cut], tmp_path)
        assert proc.returncode == 1, (cut, proc.stdout, proc.stderr[-2000:])
    for _ in range(150):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        proc = _read(reader, bytes(mutated), tmp_path)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]  # sanitizers exit otherwise
