"""The order of an epoch, and each rank's share of it: pure functions of shard counts.

Nothing here reads a shard. An epoch has two orders over its samples:

- the *read order* S: shards in a seeded order dealt to ``interleave``
  lanes; the lanes' samples interleaved in proportion to their lengths,
  each lane with a random head start of up to one shard.
  Every shard is read front to back, ``interleave`` shards at a time;
- the *yield order*: sample at read position q gets the key
  ``q + window * E`` (E exponential of mean 1, seeded); samples are yielded
  by key. Keys never precede read positions, so a reader that reads in S
  order and yields by key holds on average ``window`` samples in memory,
  as a shuffle buffer of that size would.

Both depend on (counts, seed, epoch, shuffle, interleave, window) only,
never on the world size. A rank's share is cut from them (``Stage``), so
the samples left after every rank took n can be cut again for another
world size (elastic resume).
"""

import numpy as np

from .errors import ShardError


def epoch_order(counts, seed, epoch, shuffle=True, interleave=8, window=1024):
    """(ids, keys): global sample indices in read order, and each one's yield key."""
    counts = np.asarray(counts, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n = int(starts[-1])
    if not shuffle:
        return np.arange(n, dtype=np.int64), np.arange(n, dtype=np.float64)
    rng = np.random.default_rng([seed, epoch, 0x5EED])
    order = rng.permutation(len(counts))
    order = order[counts[order] > 0]
    lanes = max(1, min(int(interleave), len(order)))
    phase = rng.random(lanes)
    ids, pos = [], []
    for lane in range(lanes):
        sh = order[lane::lanes]
        if not len(sh):
            continue
        lane_ids = np.concatenate([np.arange(starts[k], starts[k + 1], dtype=np.int64) for k in sh])
        # fractional position in the lane: every lane advances at its own
        # pace, so all end within a shard of each other. The random head
        # start (up to one shard) staggers the lanes' shard boundaries
        # anew each epoch: shards of equal size would otherwise run in
        # lockstep and a sample meet the same offsets of its co-running
        # shards every epoch.
        head = phase[lane] * len(lane_ids) / len(sh)
        pos.append((np.arange(len(lane_ids)) + head) / (len(lane_ids) + head))
        ids.append(lane_ids)
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    ids = np.concatenate(ids)
    ids = ids[np.argsort(np.concatenate(pos), kind="stable")]
    keys = np.arange(n, dtype=np.float64)
    if window > 1:
        # exponential delays of mean `window`: a shuffle buffer of that size
        # keeps each sample a geometric time, so interleave=1 has the old
        # one-shard-at-a-time buffer's statistics (same neighbour repeats)
        keys += window * rng.exponential(size=n)
    return ids, keys


class Stage:
    """One world size's cut of the samples not yet taken this epoch.

    ``rem``: read positions (into the epoch's S) not yet taken, sorted.
    Each of ``world`` ranks takes an equal contiguous run of ``rem``:
    drop (``pad=False``): ``len(rem) // world`` each, the last
    ``len(rem) % world`` not read in this stage; pad: ``ceil`` each, ``rem``
    repeated from its start to fill (the copies come last in the last
    ranks' yield order). Slots number the stage's entries in read order
    (the copies after every real sample).
    """

    def __init__(self, rem, keys, world, pad):
        m = len(rem)
        self.world = world
        self.per = -(-m // world) if pad else m // world
        total = self.per * world
        self.pos = np.resize(rem, total) if pad and m else rem[:total]  # np.resize repeats cyclically
        k = keys[self.pos] if m else np.zeros(0)
        if pad and total > m:
            lap = np.arange(total) // max(m, 1)
            k = k + lap * (float(keys.max()) + 1.0)  # copies after every real sample
        self.keys = k
        self.dropped = rem[total:]

    def plan(self, rank):
        """The rank's slots in yield order."""
        lo = rank * self.per
        part = np.arange(lo, lo + self.per, dtype=np.int64)
        return part[np.argsort(self.keys[part], kind="stable")]

    def taken(self, n):
        """Read positions taken once every rank has yielded n samples of its plan."""
        if not n:
            return np.zeros(0, np.int64)
        slots = np.arange(self.per * self.world, dtype=np.int64).reshape(self.world, self.per)
        first = np.argsort(self.keys[slots], axis=1, kind="stable")[:, :n]
        return self.pos[np.take_along_axis(slots, first, axis=1).ravel()]


def stages(n, keys, history, pad):
    """Replay ``history`` [(world, taken), ...] over n read positions: the last (current) Stage."""
    rem = np.arange(n, dtype=np.int64)
    st = None
    for i, (world, took) in enumerate(history):
        st = Stage(rem, keys, int(world), pad)
        if i + 1 < len(history):
            rem = np.setdiff1d(rem, st.taken(int(took)), assume_unique=False)
    return st


# settings a state saved before they existed had: their defaults
_OLD_DEFAULTS = {"online_recipe": "", "online_seed": 0}


def check_settings(state, mine, where, what):
    """Refuse a saved state whose settings differ from ``mine`` ({name: value}, the reader's)."""
    for k, v in mine.items():
        theirs = state.get(k, _OLD_DEFAULTS.get(k))
        if theirs != v:
            raise ShardError(f"{where}: cannot resume: the saved {what} had {k}={theirs!r}, this one has "
                             f"{v!r}; build the {what} with the same settings over the same shards")


def resume_history(saved, world, where, per_of):
    """The stage history to go on from: a saved state's ``stages`` [[world size, samples
    every rank took], ...], checked, with a stage for ``world`` appended when the last
    one's differs. ``per_of(history)``: samples per rank in history's last stage; no
    stage may have taken more."""
    ok = isinstance(saved, list) and saved and all(
        isinstance(h, (list, tuple)) and len(h) == 2 and all(isinstance(x, int) for x in h)
        and h[0] >= 1 and h[1] >= 0 for h in saved)
    if not ok:
        raise ShardError(f"{where}: saved stages {saved!r} are not [[world_size, samples], ...]; "
                         "pass the dict state_dict() returned")
    history = [list(h) for h in saved]
    if history[-1][0] != world:
        history.append([world, 0])  # another world size: cut what is left anew
    for i in range(len(history)):
        per = per_of(history[:i + 1])
        if history[i][1] > per:
            raise ShardError(f"{where}: saved position {history[i][1]} at world size "
                             f"{history[i][0]} is past that stage's {per} samples per rank")
    return history


def worker_part(plan, wid, nw, batch_size):
    """DataLoader worker ``wid`` of ``nw``: alternate blocks of ``batch_size`` of the plan."""
    if nw == 1:
        return plan
    pos = np.arange(len(plan))
    return plan[(pos // batch_size) % nw == wid]


def reorder(yield_slots, read):
    """Yield ``read``'s items (pairs (slot, item), in slot order) in ``yield_slots`` order.

    Holds the items read but not yet yielded: with the yield keys of
    ``epoch_order`` about window / 2 of them.
    """
    held = {}
    it = iter(read)
    for s in yield_slots:
        while s not in held:
            slot, item = next(it)
            held[slot] = item
        yield held.pop(s)
