"""Which rank reads which sequence of a mixed epoch: a stratified deal that respects the steps.

The problem. The epoch's canonical order and its global batches are fixed by the data
(`order.py`); what is left to choose is which rank reads which sequence of each global batch. For
a mixed pack every rank should read the mixture, sample for sample. The stratified deal robolake
used before (sort the sequences by stratum, give each run of W
neighbours one to every rank) achieves that, but only by reordering the epoch for one world size.
Here the order is not ours to change, so the deal has to satisfy two sets of constraints at once:
every run of W neighbours in stratum order (a *deal group*: sequences of nearly the same make-up)
gives one sequence to each rank, and every W-sequence slice of a global batch (a *sub-step*: a
global batch of W x B sequences is B of them) gives one sequence to each rank, so each rank reads
B per step.

The solution, window by window (`WINDOW` sub-steps, so that a run stopped anywhere has read the
mixture on every rank, not only at the end of the epoch). Sequences are the edges of a bipartite
multigraph between deal groups and sub-steps, every node of degree W (short groups and sub-steps
are padded with placeholder edges). A W-regular bipartite multigraph splits into W perfect
matchings (König); colouring its edges with the ranks is exactly the deal wanted. The colouring
halves the graph along Euler circuits while the degree is even (alternate edges of a circuit keep
every node's degree equal on both sides) and peels one perfect matching (Hopcroft-Karp) off where
it is odd, so a world of W ranks costs at most log2(W) matchings and linear-time splits: about a
second for 100,000 sequences on 8 ranks in plain Python, once per epoch and process (plans are
cached). Everything is deterministic: every rank computes the same deal.
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["deal_ranks"]


WINDOW = 64  # sub-steps dealt together: any stretch of a run is balanced to within one window


def deal_ranks(strata: np.ndarray, substeps: list[int], world_size: int, *, window: int = WINDOW) -> np.ndarray:
    """int64 [n]: the rank of each of n sequences (in canonical order, `strata` theirs) whose
    sub-steps hold `substeps[i]` <= world_size consecutive sequences each.

    Every sub-step gives each rank at most one sequence (exactly one when full), and within each
    `window` sub-steps every run of `world_size` sequences in stratum order gives each rank at
    most one: so a run stopped anywhere has read the mixture on every rank, not only at the end.
    """
    out = np.empty(len(strata), dtype=np.int64)
    lo = 0
    for w in range(0, len(substeps), window):
        part = substeps[w : w + window]
        hi = lo + sum(part)
        out[lo:hi] = _deal_window(np.asarray(strata[lo:hi]), part, world_size)
        lo = hi
    return out


def _deal_window(strata: np.ndarray, substeps: list[int], world_size: int) -> np.ndarray:
    """`deal_ranks` of one window."""
    n = len(strata)
    world = world_size
    steps = len(substeps)
    step_of = np.repeat(np.arange(steps), substeps)
    group_of = np.empty(n, dtype=np.int64)
    group_of[np.lexsort((np.arange(n), np.asarray(strata)))] = np.arange(n) // world
    groups = -(-n // world)
    nodes = max(steps, groups)
    # Pad both sides to `nodes` nodes of degree `world` with placeholder edges (their ranks are dropped).
    left = group_of.tolist()
    right = step_of.tolist()
    g_free = [g for g, d in enumerate(np.bincount(group_of, minlength=nodes).tolist()) for _ in range(world - d)]
    t_free = [t for t, d in enumerate(np.bincount(step_of, minlength=nodes).tolist()) for _ in range(world - d)]
    left += g_free
    right += t_free
    colour = [0] * len(left)
    _colour(list(range(len(left))), left, right, nodes, world, 0, colour)
    return np.asarray(colour[:n], dtype=np.int64)


def _colour(
    edges: list[int], left: list[int], right: list[int], nodes: int, degree: int, base: int, out: list[int]
) -> None:
    """Colour `edges` (a `degree`-regular bipartite multigraph) with base .. base + degree - 1."""
    work = [(edges, degree, base)]
    while work:
        es, d, b = work.pop()
        if d == 1:
            for e in es:
                out[e] = b
            continue
        if d % 2:
            matched = _perfect_matching(es, left, right, nodes)
            for e in matched:
                out[e] = b
            taken = set(matched)
            work.append(([e for e in es if e not in taken], d - 1, b + 1))
            continue
        one, two = _euler_split(es, left, right, nodes)
        work.append((one, d // 2, b))
        work.append((two, d // 2, b + d // 2))


def _euler_split(edges: list[int], left: list[int], right: list[int], nodes: int) -> tuple[list[int], list[int]]:
    """Split an even-degree bipartite multigraph into two halves of half the degree each."""
    adj: list[list[int]] = [[] for _ in range(2 * nodes)]  # left g is node g, right t is node nodes + t
    for e in edges:
        adj[left[e]].append(e)
        adj[nodes + right[e]].append(e)
    used: set[int] = set()
    ptr = [0] * (2 * nodes)
    one: list[int] = []
    two: list[int] = []
    for start in range(2 * nodes):
        while ptr[start] < len(adj[start]):
            # Walk a closed trail from `start`, alternating halves (a bipartite trail has even length).
            node, k = start, 0
            while True:
                while ptr[node] < len(adj[node]) and adj[node][ptr[node]] in used:
                    ptr[node] += 1
                if ptr[node] == len(adj[node]):
                    break
                e = adj[node][ptr[node]]
                used.add(e)
                (one if k % 2 == 0 else two).append(e)
                k += 1
                node = nodes + right[e] if node < nodes else left[e]
            while ptr[start] < len(adj[start]) and adj[start][ptr[start]] in used:
                ptr[start] += 1
    return one, two


def _perfect_matching(edges: list[int], left: list[int], right: list[int], nodes: int) -> list[int]:
    """A perfect matching (edge ids) of a regular bipartite multigraph: Hopcroft-Karp."""
    adj: list[list[int]] = [[] for _ in range(nodes)]
    for e in edges:
        adj[left[e]].append(e)
    edge_of = [-1] * nodes  # left g -> its matched edge
    owner = [-1] * nodes  # right t -> its matched left node
    for g in range(nodes):  # a greedy start leaves few to augment
        for e in adj[g]:
            if owner[right[e]] < 0:
                owner[right[e]], edge_of[g] = g, e
                break
    while True:
        dist = [-1] * nodes
        queue = deque(g for g in range(nodes) if edge_of[g] < 0)
        for g in queue:
            dist[g] = 0
        reachable = False
        while queue:
            g = queue.popleft()
            for e in adj[g]:
                g2 = owner[right[e]]
                if g2 < 0:
                    reachable = True
                elif dist[g2] < 0:
                    dist[g2] = dist[g] + 1
                    queue.append(g2)
        if not reachable:
            break
        ptr = [0] * nodes
        for g0 in range(nodes):
            if edge_of[g0] >= 0:
                continue
            stack: list[int] = [g0]
            via: list[int] = []  # via[i]: the edge stack[i] takes
            while stack:
                g = stack[-1]
                if ptr[g] == len(adj[g]):
                    dist[g] = -1  # a dead end for the rest of this phase
                    stack.pop()
                    if via:
                        via.pop()
                    continue
                e = adj[g][ptr[g]]
                ptr[g] += 1
                g2 = owner[right[e]]
                if g2 < 0:  # a free right node: flip the path
                    via.append(e)
                    for gi, ei in zip(stack, via, strict=True):
                        owner[right[ei]], edge_of[gi] = gi, ei
                    break
                if dist[g2] == dist[g] + 1:
                    via.append(e)
                    stack.append(g2)
    if min(edge_of, default=0) < 0:
        raise RuntimeError("internal: the deal's graph has no perfect matching (it is not regular)")
    return edge_of
