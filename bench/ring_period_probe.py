#!/usr/bin/env python3
"""Whether the ring steps of a simulated attention layer repeat: the precondition of folding the ring (simulating
one period of steps and advancing the others in closed form).

Reads the Chrome trace of `hcpsim simulate --trace FILE` (one event per op, with cp_rank, ring_step, phase,
start_ps and end_ps in its args) and, per phase, gives each (rank, ring step) a signature: the step's ops in
op-index order as (kind, stream, duration in ps, start offset from the step's first op in ps). Labels are not
part of the signature (they name the step number). Then it reports:
  * per rank: the longest run of consecutive steps with equal signatures and an equal step-to-step start shift
    (the steps a per-rank fold could skip);
  * global time shift: the pairs of consecutive steps (i, i+1) at which every rank's step i+1 is its step i moved
    by one common shift (what a fold of the whole ring state at one period needs);
  * ring relabelling: the pairs at which rank p + 1's step i + 1 is rank p's step i (p < P - 1), i.e. the state
    moves one ring position per step, which a causal ring's lower/upper half-block frontier does.
Only ring positions' representatives are compared for a2a+p2p: ranks r with r % A == 0 (pass --a2a A).

Usage: ring_period_probe.py TRACE.json [--a2a A]
"""
import argparse
import collections
import json

# Op kinds on the comm stream (the builders put every communication op, and only those, there).
COMM_KINDS = ("send_recv", "all_to_all", "all_gather", "reduce_scatter")


def load_steps(path, a2a):
    """{phase: {rank: {step: [(op_index, kind, tid, start_ps, end_ps)]}}} of the ring-step ops; phase
    "backward recompute" holds the layer's recomputed forward ring ops."""
    with open(path) as f:
        trace = json.load(f)
    steps = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for e in trace["traceEvents"]:
        a = e.get("args", {})
        if e.get("ph") != "X" or "cp_rank" not in a or a.get("ring_step", -1) < 0:
            continue
        if a["cp_rank"] % a2a:
            continue
        # The layer's selective recompute reruns forward ring ops in the backward (labels "recompute ..."):
        # a chain of its own, which runs ahead of the backward's.
        phase = a["phase"] + (" recompute" if e["name"].startswith("recompute") else "")
        steps[phase][a["cp_rank"]][a["ring_step"]].append(
            (a["op_index"], a["kind"], e["tid"], a["start_ps"], a["end_ps"]))
    return steps


def signature(ops):
    """(first start, the ops as (kind, stream, duration, offset from the first start)) in op-index order."""
    ops = sorted(ops)
    first = min(o[3] for o in ops)
    return first, tuple((o[1], o[2], o[4] - o[3], o[3] - first) for o in ops)


def chain(ops, which):
    """The step's ops of one chain: "comm" (the comm stream), "compute" (the compute and cp streams) or
    "attention" (the attention block kernels alone)."""
    if which == "attention":
        return [o for o in ops if o[1] in ("attn_fwd_block", "attn_bwd_block")]
    return [o for o in ops if (o[1] in COMM_KINDS) == (which == "comm")]


def repeats(sigs, i, k):
    """Step i repeats step i - k: equal signature and the start shift of steps i - k .. i - 1 repeated."""
    return (i >= 2 * k and sigs[i][1] == sigs[i - k][1]
            and sigs[i][0] - sigs[i - k][0] == sigs[i - k][0] - sigs[i - 2 * k][0])


def longest_run(sigs, k):
    """(length of the longest run of steps that each repeat the step k before, number of such steps): a fold
    with period k could skip them."""
    best = run = total = 0
    for i in range(len(sigs)):
        run = run + 1 if repeats(sigs, i, k) else 0
        total += 1 if run else 0
        best = max(best, run)
    return best, total


def report(phase, ranks):
    order = sorted(ranks)
    n = max(len(s) for s in ranks.values())
    print(f"{phase}: {len(order)} ranks x {n} ring steps")
    complete = all(len(ranks[r]) == n for r in order)
    for name, which in (("whole step", None), ("comm stream", "comm"), ("compute streams", "compute"),
                        ("attention", "attention")):
        sigs = {r: [signature(ranks[r][i] if which is None else chain(ranks[r][i], which) or ranks[r][i])
                    for i in range(n)] for r in order}
        for k in (1, 2):
            runs = [longest_run(sigs[r], k) for r in order]
            lengths = sorted(length for length, _ in runs)
            repeating = sum(total for _, total in runs)
            glob = [i for i in range(2 * k, n) if complete and all(repeats(sigs[r], i, k) for r in order)
                    and len({sigs[r][i][0] - sigs[r][i - k][0] for r in order}) == 1]
            print(f"  {name:15} period {k}: per-rank longest run of repeating steps min {lengths[0]} median "
                  f"{lengths[len(lengths) // 2]} max {lengths[-1]}; repeating (rank, step)s "
                  f"{100 * repeating / (len(order) * n):.0f}%; steps repeating on every rank by one common shift: "
                  f"{len(glob)}")
        relabel = [i for i in range(1, n - 1) if complete and all(
            sigs[order[j + 1]][i + 1][1] == sigs[order[j]][i][1] for j in range(len(order) - 1))]
        print(f"  {name:15} ring relabelling (rank p step i = rank p+1 step i+1 for all p): {len(relabel)} steps")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--a2a", type=int, default=1, help="A of a2a+p2p: compare ranks r with r %% A == 0")
    args = parser.parse_args()
    steps = load_steps(args.trace, args.a2a)
    for phase in ("forward", "backward", "backward recompute"):
        if phase in steps:
            report(phase, steps[phase])


if __name__ == "__main__":
    main()
