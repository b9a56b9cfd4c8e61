"""A program for looking at ``--png`` pictures: threads of nested ranges (3 levels), ~20 names in
their own colours, a counter and a few marks; N ranges in all (default 2e6).

    python -m nvtx_cffi trace --png timeline.png scripts/png_demo.py 2e6
    python -m nvtx_cffi trace --png small.png scripts/png_demo.py 2000 --threads 2 --sleep
"""
import argparse
import threading
import time

import nvtx_cffi as nvtx

STEPS = [("train step", "#1f77b4"), ("eval step", "#17becf")]
PHASES = [("data load", "#8c564b"), ("forward", "#2ca02c"), ("backward", "#d62728"), ("optimizer", "#9467bd")]
OPS = [("matmul", "#ff7f0e"), ("conv2d", "#e377c2"), ("relu", "#bcbd22"), ("softmax", "#7f7f7f"),
       ("layernorm", "#aec7e8"), ("dropout", "#ffbb78"), ("allreduce", "#98df8a"), ("copy h2d", "#ff9896"),
       ("copy d2h", "#c5b0d5"), ("attention", "#c49c94"), ("embedding", "#f7b6d2"), ("gelu", "#dbdb8d"),
       ("adam", "#9edae5"), ("loss", "#393b79")]


def worker(index, steps, ops_per_phase, sleep, queue):
    push, pop = nvtx.push_range, nvtx.pop_range
    for step in range(steps):
        name, color = STEPS[1] if step % 10 == 9 else STEPS[0]
        push(name, color=color)
        for p, (pname, pcolor) in enumerate(PHASES):
            push(pname, color=pcolor)
            for k in range(ops_per_phase):
                oname, ocolor = OPS[(p * 3 + k + index) % len(OPS)]
                push(oname, color=ocolor)
                if sleep:
                    time.sleep(0.0002 * (1 + (k + p) % 3))
                else:
                    for _ in range(3 * ((k + p) % 4)):  # a little work, of varying length
                        pass
                pop()
            pop()
        pop()
        if index == 0 and step % 50 == 0:
            queue.sample(step % 13)
        if index == 0 and step % 1000 == 999:
            nvtx.mark("checkpoint", color="black")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=float, nargs="?", default=2e6, help="ranges in all")
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--ops", type=int, default=5, help="ranges per phase")
    ap.add_argument("--sleep", action="store_true", help="ops sleep (a slower, more even picture)")
    args = ap.parse_args()
    per_step = 1 + len(PHASES) * (1 + args.ops)
    steps = max(1, int(args.n) // per_step // args.threads)
    queue = nvtx.get_domain("demo").get_counter("queue depth", int)
    threads = [threading.Thread(target=worker, args=(i, steps, args.ops, args.sleep, queue), name=f"worker-{i}")
               for i in range(args.threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{steps * per_step * args.threads} ranges in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
