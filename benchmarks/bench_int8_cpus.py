"""Do the embedding model's vectors depend on the CPU? The same texts embedded on this machine and
under user-mode QEMU with a CPU model without AVX-512 (and so without VNNI), for the int8 model as
the workbench builds it, two other quantisations onnxruntime offers, and the float weights.

    apt-get install qemu-user      # once
    .venv/bin/python benchmarks/bench_int8_cpus.py [--cpu Haswell] [--texts 160]

Prints, per model: whether the vectors are bit-identical across the two CPUs, the largest
element difference and the smallest cosine between a text's two vectors, and each model's
agreement with the float vectors on this machine. It asserts nothing (docs/judges.md, "Precision").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
VARIANTS = {
    "int8": {},  # what the workbench builds: int8 weights per channel, uint8 activations
    "int8, reduce_range": {"reduce_range": True},  # 7-bit weights: onnxruntime's advice for CPUs without VNNI
    "int8, uint8 weights": {"weight_type": "QUInt8"},
    "float": None,
}


def texts(n: int) -> list[str]:
    from workbench.judges.embeddings import passage_text

    enc = REPO / "sample_corpora" / "encyclopedia"
    questions = [json.loads(line)["question"] for line in (enc / "questions.jsonl").read_text().splitlines() if line]
    passages = [passage_text(p["title"], p["text"]) for p in json.loads((enc / "corpus.json").read_text())]
    return (questions + passages)[:n]


def worker(variant: str, out: str, models: str, n: int) -> None:
    """Embed the texts with one variant (its int8 file built into `models` on first use)."""
    import onnxruntime.quantization as q

    from workbench.judges.embeddings import MiniLM

    options = VARIANTS[variant]
    if options:
        build = q.quantize_dynamic

        def quantize(*args, **kwargs):  # the workbench's own build, with this variant's options
            kwargs.update({k: getattr(q.QuantType, v) if k == "weight_type" else v for k, v in options.items()})
            return build(*args, **kwargs)

        q.quantize_dynamic = quantize
    model = MiniLM(precision="float" if options is None else "int8", models_dir=Path(models))
    np.save(out, np.asarray(model.encode(texts(n)), dtype=np.float32))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", default="Haswell", help="QEMU CPU model to compare with (default: Haswell, AVX2 only)")
    ap.add_argument("--texts", type=int, default=160, help="encyclopedia questions then passages (default 160)")
    ap.add_argument("--worker", nargs=3, metavar=("VARIANT", "OUT", "MODELS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, args.texts)
        return
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        sys.exit("bench_int8_cpus: needs qemu-x86_64 (apt-get install qemu-user)")
    python = os.path.realpath(sys.executable)  # QEMU runs the interpreter itself, not the venv's link
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*sys.path[1:], str(REPO)]))
    flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[-1].split("\n", 1)[0].split()
    print(f"# this CPU: avx512_vnni {'yes' if 'avx512_vnni' in flags else 'no'}; compared with qemu -cpu {args.cpu}")
    work = Path(tempfile.mkdtemp(prefix="int8-cpus-"))
    vectors = {}
    for i, variant in enumerate(VARIANTS):
        got = []
        for where, prefix in (("native", []), (args.cpu, [qemu, "-cpu", args.cpu])):
            out = work / f"{i}-{where}.npy"
            t = time.perf_counter()
            cmd = [
                *prefix,
                python,
                __file__,
                "--texts",
                str(args.texts),
                "--worker",
                variant,
                str(out),
                str(work / str(i)),
            ]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"bench_int8_cpus: {variant} on {where} failed:\n{done.stderr[-2000:]}")
            got.append(np.load(out))
            print(f"#   {variant} on {where}: {time.perf_counter() - t:.1f} s", flush=True)
        vectors[variant] = got
    base = vectors["float"][0]
    print(
        f"\n{args.texts} texts | same bits on both CPUs | max |difference| | min cosine across CPUs | "
        "cosine to float: mean, min"
    )
    for variant, (a, b) in vectors.items():
        across, to_float = (a * b).sum(axis=1), (a * base).sum(axis=1)
        print(
            f"{variant:20s} {'yes' if np.array_equal(a, b) else 'no':>4s} {float(np.abs(a - b).max()):.2e} "
            f"{float(across.min()):.5f}   {float(to_float.mean()):.5f}, {float(to_float.min()):.5f}"
        )


if __name__ == "__main__":
    main()
